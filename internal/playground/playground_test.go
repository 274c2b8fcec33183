package playground

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerServesFiles(t *testing.T) {
	tests := []struct {
		path, contentType, contains string
	}{
		{"/playground/", "text/html; charset=utf-8", "<title>runnel playground</title>"},
		{"/playground/?chat=1", "text/html; charset=utf-8", "<title>runnel playground</title>"},
		{"/playground/index.html", "text/html; charset=utf-8", `src="app.js"`},
		{"/playground/app.js", "text/javascript; charset=utf-8", "/v1/chat"},
		{"/playground/stream.js", "text/javascript; charset=utf-8", "export async function readEventStream"},
		{"/playground/connect.js", "text/javascript; charset=utf-8", "export class ConnectFlow"},
		{"/playground/style.css", "text/css; charset=utf-8", "prefers-color-scheme: dark"},
		{"/playground/favicon.svg", "image/svg+xml", "<svg"},
		{"/playground/connect-demo.html", "text/html; charset=utf-8", "wants to connect to runnel playground"},
		{"/playground/connect-demo.js", "text/javascript; charset=utf-8", `type: "runnel-connect"`},
	}
	h := Handler()
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", rec.Code)
			}
			want := map[string]string{
				"Content-Type":            tt.contentType,
				"Cache-Control":           "no-cache",
				"X-Content-Type-Options":  "nosniff",
				"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
			}
			for k, v := range want {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if rec.Header().Get("ETag") == "" {
				t.Error("no ETag, so no-cache cannot revalidate")
			}
			if !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("body does not contain %q", tt.contains)
			}
		})
	}
}

func TestHandlerRefuses(t *testing.T) {
	tests := []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/playground", http.StatusNotFound}, // the mux redirects it to /playground/
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/v1/chat", http.StatusNotFound},
		{http.MethodGet, "/playground/missing.js", http.StatusNotFound},
		// No directory listings, and nothing outside what the page is made of.
		{http.MethodGet, "/playground/static/", http.StatusNotFound},
		{http.MethodGet, "/playground/static/index.html", http.StatusNotFound},
		{http.MethodGet, "/playground/./", http.StatusNotFound},
		{http.MethodGet, "/playground/../playground.go", http.StatusNotFound},
		{http.MethodGet, "/playground//index.html", http.StatusNotFound},
		{http.MethodGet, "/playground/index.html/", http.StatusNotFound},
		{http.MethodPost, "/playground/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/playground/app.js", http.StatusMethodNotAllowed},
	}
	h := Handler()
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/", nil)
			req.URL.Path = tt.path // as sent, without the cleaning NewRequest's parser would not do either
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d", rec.Code, tt.code)
			}
			// Even an error page may not be sniffed into HTML or framed.
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Content-Security-Policy") == "" {
				t.Errorf("headers %v lack nosniff or the CSP", rec.Header())
			}
		})
	}
}

func TestHandlerRevalidatesAndHead(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/playground/", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("HEAD: status %d, %d body bytes, type %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Type"))
	}
	req := httptest.NewRequest(http.MethodGet, "/playground/app.js", nil)
	req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("index.html's ETag matched app.js: status %d", rec.Code)
	}
	req.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Fatalf("revalidation: status %d, want 304", rec.Code)
	}
}

// TestPagesHaveNoInlineCode keeps the HTML within its own CSP: an inline
// script, style or event handler would be blocked in the browser, silently.
func TestPagesHaveNoInlineCode(t *testing.T) {
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle\s*=|\son[a-z]+\s*=|javascript:`)
	external := regexp.MustCompile(`(?i)(?:src|href)\s*=\s*"(?:https?:)?//`)
	pages, err := fs.Glob(static, "static/*.html")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages (%v)", err)
	}
	for _, name := range pages {
		data, err := static.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := inline.Find(data); m != nil {
			t.Errorf("%s has inline code the CSP blocks: %q", name, m)
		}
		if m := external.Find(data); m != nil {
			t.Errorf("%s loads from another origin: %q", name, m)
		}
	}
}
