package run

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/provider"
	"github.com/runnel/runnel/internal/sandbox"
	"github.com/runnel/runnel/internal/telemetry"
)

// Bounds on the files a request's messages bring (DESIGN §3.7).
const (
	maxAttachments       = 100
	maxAttachmentBytes   = 16 << 20
	maxAttachmentsBytes  = 64 << 20
	attachmentTimeout    = 15 * time.Second
	attachmentsDirectory = "attachments"
)

// attachments turns the files in the user's messages into what the model
// can take (DESIGN §3.7): an attachment block the platform stores is
// fetched from Options.AttachmentsURL; an image or a file reaches the model
// inline when modelCapabilities allows that modality (or says nothing);
// otherwise it is saved in the workspace, when the run has one, and the
// model is told where. Whatever cannot be delivered is never dropped
// silently: the model reads a sentence in its place, and the caller gets a
// notice naming the file.
type attachments struct {
	m    *Manager
	p    *plan
	ws   *sandbox.Workspace
	auth string // the platform's credential, for fetching
	// fetched counts the bytes fetched so far, against maxAttachmentsBytes.
	fetched int64
	count   int
}

// deliverAttachments rewrites the user messages of the history the model
// sees, and adds the notices of what could not be delivered.
func (m *Manager) deliverAttachments(ctx context.Context, p *plan, ws *sandbox.Workspace) {
	a := &attachments{m: m, p: p, ws: ws, auth: platformAuthorization(p.req, p.export)}
	msgs := p.prompt.Messages
	for i, msg := range msgs {
		if msg.Role != runnel.RoleUser || !slices.ContainsFunc(msg.Content, isFile) {
			continue
		}
		content := make([]runnel.Block, 0, len(msg.Content))
		for _, b := range msg.Content {
			if isFile(b) {
				b = a.deliver(ctx, b)
			}
			content = append(content, b)
		}
		msgs[i] = runnel.Message{Role: msg.Role, Content: content}
	}
}

func isFile(b runnel.Block) bool {
	return b.Type == runnel.BlockAttachment || b.Type == runnel.BlockImage || b.Type == runnel.BlockResource && b.Data != ""
}

// deliver is what the model gets for one file block.
func (a *attachments) deliver(ctx context.Context, b runnel.Block) runnel.Block {
	name := displayName(b)
	if a.count++; a.count > maxAttachments {
		return a.undelivered(b, fmt.Sprintf("the request carries more than %d files", maxAttachments))
	}
	if b.Type == runnel.BlockAttachment {
		data, mimeType, err := a.fetch(ctx, b)
		if err != nil {
			return a.undelivered(b, err.Error())
		}
		b = runnel.Block{Type: runnel.BlockResource, Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType,
			Filename: b.Filename, AttachmentID: b.AttachmentID}
		if isImage(mimeType) {
			b.Type = runnel.BlockImage
		}
	}
	modality := "file"
	if b.Type == runnel.BlockImage {
		modality = "image"
	}
	if a.accepts(modality) {
		return b
	}
	if rel, ok := a.save(b); ok {
		return textBlock(fmt.Sprintf("[The user attached %s; this model does not take %ss inline, so it is saved in the workspace at %s.]",
			name, modality, rel))
	}
	return a.undelivered(b, fmt.Sprintf("the model does not take %ss (modelCapabilities.inputModalities) and the run has no workspace to put it in", modality))
}

// accepts reports whether the model takes a modality inline: what
// modelCapabilities.inputModalities lists ("image" or "images"; "file",
// "files" or "document" for other files), or anything when the request
// does not say.
func (a *attachments) accepts(modality string) bool {
	mc := a.p.req.ModelCapabilities
	if mc == nil || mc.InputModalities == nil {
		return true
	}
	for _, m := range mc.InputModalities {
		m = strings.ToLower(strings.TrimSpace(m))
		if m == modality || m == modality+"s" || modality == "file" && m == "document" {
			return true
		}
	}
	return false
}

// undelivered is the sentence the model reads in place of a file it could
// not be given, after the notice the caller gets.
func (a *attachments) undelivered(b runnel.Block, why string) runnel.Block {
	name := displayName(b)
	a.p.notices = append(a.p.notices, fmt.Sprintf("The attachment %s was not given to the model: %s.", name, why))
	return textBlock(fmt.Sprintf("[The user attached %s, but it could not be loaded.]", name))
}

// fetch reads an attachment the platform stores from the attachments
// endpoint: at most maxAttachmentBytes, within attachmentTimeout, with the
// platform's credential, never following a redirect to another origin.
func (a *attachments) fetch(ctx context.Context, b runnel.Block) ([]byte, string, error) {
	tmpl := a.m.opts.AttachmentsURL
	switch {
	case tmpl == "":
		return nil, "", errors.New("this runnel has no attachments endpoint to fetch it from (RUNNEL_ATTACHMENTS_URL)")
	case !validAttachmentID(b.AttachmentID):
		return nil, "", errors.New("its attachmentId is not an id runnel can look up")
	}
	target := strings.NewReplacer("{id}", url.PathEscape(b.AttachmentID), "{sessionId}", url.QueryEscape(a.p.req.SessionID)).Replace(tmpl)
	ctx, cancel := context.WithTimeout(ctx, attachmentTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, "", errors.New("the attachments endpoint is not a valid URL")
	}
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	resp, err := provider.SameOriginClient(a.m.opts.HTTPClient).Do(req)
	if err != nil {
		return nil, "", errors.New("the attachments endpoint could not be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("the attachments endpoint answered HTTP %d", resp.StatusCode)
	}
	limit := min(int64(maxAttachmentBytes), maxAttachmentsBytes-a.fetched)
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, "", errors.New("reading it from the attachments endpoint failed")
	case int64(len(data)) > limit:
		return nil, "", fmt.Errorf("it is larger than runnel takes (%d MiB a file, %d MiB a request)", maxAttachmentBytes>>20, maxAttachmentsBytes>>20)
	}
	a.fetched += int64(len(data))
	mimeType := b.MimeType
	// mime takes a bare type ("text") too; providers take only type/subtype.
	if ct, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && strings.Contains(ct, "/") && ct != "application/octet-stream" {
		mimeType = ct
	}
	return data, mimeType, nil
}

// save writes a file into the workspace under attachments/<id or n>/,
// and returns its workspace path.
func (a *attachments) save(b runnel.Block) (string, bool) {
	if a.ws == nil || b.Data == "" {
		return "", false
	}
	data, err := base64.StdEncoding.DecodeString(b.Data)
	if err != nil {
		return "", false
	}
	dir := b.AttachmentID
	if !validAttachmentID(dir) {
		dir = fmt.Sprintf("file-%d", a.count)
	}
	base := path.Base(strings.ReplaceAll(b.Filename, `\`, "/"))
	if base == "." || base == "/" || base == ".." || base == "" {
		base = "attachment"
	}
	rel := path.Join(attachmentsDirectory, dir, base)
	if err := a.ws.WriteFiles([]runnel.File{{Path: rel, Content: string(data)}}); err != nil {
		return "", false
	}
	return rel, true
}

// validAttachmentID admits ids that are one safe path segment: letters,
// digits, '-' and '_' (Agenta's are UUIDs).
func validAttachmentID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	return strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == ""
}

func isImage(mimeType string) bool {
	switch mimeType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

func displayName(b runnel.Block) string {
	name := b.Filename
	if name == "" {
		name = b.URI
	}
	if name == "" {
		name = "a file"
	}
	if b.MimeType != "" {
		return fmt.Sprintf("%s (%s)", name, b.MimeType)
	}
	return name
}

func textBlock(s string) runnel.Block { return runnel.Block{Type: runnel.BlockText, Text: s} }

// platformAuthorization is the platform's credential for this run, which
// the attachments endpoint takes: the callback authorization, or the one
// of the run's OTLP exporter (what Agenta's runner uses).
func platformAuthorization(req *runnel.RunRequest, export *telemetry.Export) string {
	if req.ToolCallback != nil && req.ToolCallback.Authorization != "" {
		return req.ToolCallback.Authorization
	}
	if export == nil {
		return ""
	}
	for k, v := range export.Headers {
		if strings.EqualFold(k, "authorization") {
			return v
		}
	}
	return ""
}
