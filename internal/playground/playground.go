// Package playground is the chat page `runnel serve --playground` serves
// under /playground/: a small browser client of runnel's own POST /v1/chat
// (the Vercel AI SDK UI Message Stream, DESIGN §3.6) that shows streamed
// text and reasoning, tool calls, approvals and client tools such as an
// OAuth-style "connect" popup (§4.4, docs/pause-resume.md).
//
// The page is plain HTML, CSS and ES modules embedded in the binary: no
// build step, no third-party code, nothing fetched from elsewhere. Every
// answer carries a Content-Security-Policy that allows only this origin, so
// the page cannot run inline script or load anything off the runnel it came
// from.
//
//	mux.Handle("/playground/", playground.Handler())
package playground

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is the path the page is served under.
const Prefix = "/playground/"

// contentSecurityPolicy allows only this origin for everything the page
// loads or connects to: model and tool data are drawn with textContent, and
// this policy is the second line should that ever slip. frame-ancestors
// keeps other sites from framing the approval buttons (clickjacking).
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"

// contentType is the type of a file the page is made of. A fixed table
// rather than mime.TypeByExtension, whose answer for .js depends on the
// host's mime files; a file of another kind makes Handler panic, so the
// package's tests catch it.
func contentType(name string) (string, bool) {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8", true
	case ".js":
		return "text/javascript; charset=utf-8", true
	case ".css":
		return "text/css; charset=utf-8", true
	case ".svg":
		return "image/svg+xml", true
	case ".png":
		return "image/png", true
	}
	return "", false
}

type file struct {
	data        []byte
	contentType string
	etag        string
}

type handler struct {
	files map[string]file
}

// Handler serves the playground's files for GET and HEAD requests under
// /playground/ ("/playground/" is index.html) and answers 404 to anything
// else, directories included. Answers say `Cache-Control: no-cache` with an
// ETag, so a browser revalidates and always runs the page of the binary it
// talks to.
func Handler() http.Handler {
	files := make(map[string]file)
	err := fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentType(name)
		if !ok {
			return fmt.Errorf("playground: %s has no known content type", name)
		}
		data, err := static.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		files[strings.TrimPrefix(name, "static/")] = file{
			data:        data,
			contentType: ctype,
			etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
		}
		return nil
	})
	if err != nil {
		// The files are embedded at build time, so this is a programmer
		// error that the package's tests catch.
		panic(err)
	}
	return handler{files: files}
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	// ServeContent answers If-None-Match with 304 and handles HEAD and
	// ranges; a zero modification time leaves Last-Modified out.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.data))
}
