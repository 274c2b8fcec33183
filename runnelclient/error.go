package runnelclient

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// Error is an answer of runnel's that is not 2xx: a request refused
// (400, 401, 413, 429) or a one-shot run that failed (500, 502, 503).
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code and Message are runnel's errorCode and error sentence; both are
	// empty when the body was not runnel's (a proxy's error page, say).
	Code    runnel.ErrorCode
	Message string
	// RequestID names the request in runnel's logs.
	RequestID string
	// Result is runnel's Result-shaped answer, when it gave one: a failed
	// run's messages, usage and events are there.
	Result *runnel.Result
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runnel: HTTP %d", e.StatusCode)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	} else if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	return b.String()
}

// statusError reads a non-2xx answer into an *Error. runnel answers with a
// Result-shaped JSON body, or, for a stream whose run ended before its
// first event, with an NDJSON result record.
func (c *Client) statusError(resp *http.Response) *Error {
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	body, err := c.readAll(resp.Body)
	if err != nil {
		return e // the status says what there is to say
	}
	var res *runnel.Result
	switch mediaType(resp) {
	case "application/json":
		var r runnel.Result
		if strictjson.Unmarshal(body, &r) == nil {
			res = &r
		}
	case "application/x-ndjson":
		for line := range bytes.Lines(body) {
			var rec record
			if strictjson.Unmarshal(bytes.TrimSpace(line), &rec) == nil && rec.Kind == "result" && rec.Result != nil {
				res = rec.Result
			}
		}
	}
	if res != nil && (res.Error != "" || res.ErrorCode != "") {
		e.Result, e.Code, e.Message = res, res.ErrorCode, res.Error
		if res.RequestID != "" {
			e.RequestID = res.RequestID
		}
	}
	return e
}
