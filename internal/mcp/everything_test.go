package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/runnel/runnel/internal/mcp/mcptest"
	"strings"
	"testing"
	"time"
)

func TestServerEverything(t *testing.T) {
	s := mcptest.StartEverything(t)
	opts := &Options{Guard: GuardOptions{HostAllowlist: []string{"127.0.0.1:" + s.Port}}}
	pool := Connect(t.Context(), []ServerSpec{httpSpec("everything", s.URL)}, opts)
	defer pool.Close()
	if n := pool.Notices(); len(n) != 0 {
		t.Fatalf("notices: %q", n)
	}
	echo := toolNamed(t, pool, "echo")
	if echo.QualifiedName != "mcp__everything__echo" || echo.ReadOnly == nil || !*echo.ReadOnly {
		t.Errorf("echo = %+v", echo)
	}
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Properties["message"].Type != "string" {
		t.Errorf("echo schema = %s (%v)", echo.InputSchema, err)
	}

	tests := []struct{ tool, args, want string }{
		{"mcp__everything__echo", `{"message":"hello"}`, "Echo: hello"},
		{"mcp__everything__get-sum", `{"a":2,"b":3}`, "The sum of 2 and 3 is 5."},
		{"mcp__everything__get-tiny-image", `{}`, "Here's the image you requested:\n[image image/png, "},
	}
	for _, tt := range tests {
		res, err := pool.Call(t.Context(), tt.tool, json.RawMessage(tt.args))
		if err != nil || res.IsError || !strings.HasPrefix(res.Content, tt.want) {
			t.Errorf("%s = %+v, %v; want a result starting %q", tt.tool, res, err, tt.want)
		}
	}

	// A long operation cut short by its context: the call ends, and the
	// session still closes cleanly afterwards.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := pool.Call(ctx, "mcp__everything__trigger-long-running-operation", json.RawMessage(`{"duration":30,"steps":3}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("long operation: %v, want a deadline error", err)
	}

	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	s.WaitFor(t, "Received session termination request")
}
