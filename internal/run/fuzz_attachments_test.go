package run

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// attachmentAnswer answers every request with status, Content-Type and
// body.
type attachmentAnswer struct {
	status      int
	contentType string
	body        []byte
}

func (a attachmentAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {a.contentType}}, Body: io.NopCloser(bytes.NewReader(a.body)), Request: req}, nil
}

// FuzzAttachmentAnswer fuzzes what runnel makes of the platform's answer
// for an attachment: the file the model gets holds the body's bytes
// exactly, under a media type that is the block's or the answer's (as
// mime reads it: no parameters, so it fits a data: URL), an image only
// of the image types providers take; anything else is a sentence in its
// place with a notice. Either way the block is one a replay may hold.
func FuzzAttachmentAnswer(f *testing.F) {
	f.Add(true, "image/png", []byte("\x89PNG\r\n\x1a\n"))
	f.Add(true, "Text/Plain; charset=utf-8", []byte("hello"))
	f.Add(true, "application/octet-stream", []byte{0, 1, 2})
	f.Add(true, "image/svg+xml;a=b,c", []byte("<svg/>"))
	f.Add(true, "", []byte(""))
	f.Add(false, "text/html", []byte("<h1>gone</h1>"))
	f.Fuzz(func(t *testing.T, ok bool, contentType string, body []byte) {
		status := http.StatusNotFound
		if ok {
			status = http.StatusOK
		}
		m := &Manager{opts: Options{AttachmentsURL: "http://platform.test/attachments/{id}/content?session_id={sessionId}",
			HTTPClient: &http.Client{Transport: attachmentAnswer{status, contentType, body}}}}
		p := &plan{req: &runnel.RunRequest{SessionID: "s 1"}}
		a := &attachments{m: m, p: p}
		in := runnel.Block{Type: runnel.BlockAttachment, AttachmentID: "a-1", Filename: "photo.png", MimeType: "image/png"}
		b := a.deliver(t.Context(), in)
		if err := strictjson.Check(mustJSON(t, b)); err != nil {
			t.Fatalf("the block %+v is not one a replay may hold: %v", b, err)
		}
		if b.Type == runnel.BlockText {
			if len(p.notices) != 1 || !strings.Contains(b.Text, "could not be loaded") {
				t.Fatalf("an undelivered file gave %q with notices %q", b.Text, p.notices)
			}
			if status == http.StatusOK && len(body) <= maxAttachmentBytes {
				t.Fatalf("a 200 answer of %d bytes was not delivered: %q", len(body), p.notices)
			}
			return
		}
		if status != http.StatusOK || len(p.notices) != 0 {
			t.Fatalf("HTTP %d delivered %+v with notices %q", status, b, p.notices)
		}
		if b.Data != base64.StdEncoding.EncodeToString(body) || b.AttachmentID != in.AttachmentID || b.Filename != in.Filename {
			t.Fatalf("the delivered file %+v is not the answer's bytes under the attachment's name", b)
		}
		if b.MimeType != in.MimeType && (strings.ContainsAny(b.MimeType, ";, \t") || !strings.Contains(b.MimeType, "/") || b.MimeType != strings.ToLower(b.MimeType)) {
			t.Fatalf("media type %q, from Content-Type %q, does not fit a data: URL", b.MimeType, contentType)
		}
		if (b.Type == runnel.BlockImage) != isImage(b.MimeType) || b.Type != runnel.BlockImage && b.Type != runnel.BlockResource {
			t.Fatalf("a %s block of type %q", b.Type, b.MimeType)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
