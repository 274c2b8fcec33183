package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recorder is a Caller whose tools behave by name, and which records the
// calls it receives and what happened to them.
type recorder struct {
	// gate is how many "gate" calls must be in flight together before
	// they return.
	gate int
	// onCall, if set, runs first on every call.
	onCall func()

	mu          sync.Mutex
	calls       []string
	events      []string
	inflight    int
	maxInflight int
	waiting     int
	gateOpen    chan struct{}
}

// testTools are the tools of server "s" that recorder knows.
func testTools() []Tool {
	var tools []Tool
	for _, name := range []string{"echo", "text", "json", "number", "quoted", "empty", "fail", "broken", "approve", "client", "slow", "gate"} {
		tools = append(tools, Tool{Server: "s", Name: name})
	}
	return tools
}

func (r *recorder) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (CallResult, error) {
	if r.onCall != nil {
		r.onCall()
	}
	r.mu.Lock()
	r.calls = append(r.calls, server+"."+tool+" "+string(args))
	r.inflight++
	r.maxInflight = max(r.maxInflight, r.inflight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
	}()

	switch tool {
	case "echo":
		return CallResult{Content: string(args)}, nil
	case "text":
		return CallResult{Content: "plain text"}, nil
	case "json":
		return CallResult{Content: ` {"a": [1, 2]} `}, nil
	case "number":
		return CallResult{Content: "42"}, nil
	case "quoted":
		return CallResult{Content: `"quoted"`}, nil
	case "empty":
		return CallResult{}, nil
	case "fail":
		return CallResult{Content: "nope: */ \"quoted\"", IsError: true}, nil
	case "broken":
		return CallResult{}, errors.New("connection reset")
	case "approve":
		return CallResult{}, fmt.Errorf("gate says: %w", &Refusal{Server: server, Tool: tool, Direct: "mcp__s__approve"})
	case "client":
		return CallResult{}, &Refusal{Server: server, Tool: tool, Direct: "mcp__s__client", ClientTool: true}
	case "slow":
		<-ctx.Done()
		r.event("slow ended: " + ctx.Err().Error())
		return CallResult{}, ctx.Err()
	case "gate":
		return r.waitGate(ctx)
	}
	return CallResult{}, fmt.Errorf("recorder has no tool %s.%s", server, tool)
}

// waitGate returns once r.gate gate calls wait together, and lets them all
// go. With a cap of r.gate calls in flight and a multiple of r.gate calls,
// every call gets through; without a cap, more than r.gate are in flight.
func (r *recorder) waitGate(ctx context.Context) (CallResult, error) {
	r.mu.Lock()
	if r.gateOpen == nil {
		r.gateOpen = make(chan struct{})
	}
	open := r.gateOpen
	r.waiting++
	if r.waiting == r.gate {
		close(r.gateOpen)
		r.gateOpen, r.waiting = nil, 0
	}
	r.mu.Unlock()
	select {
	case <-open:
		return CallResult{Content: "{}"}, nil
	case <-ctx.Done():
		return CallResult{}, ctx.Err()
	}
}

func (r *recorder) event(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) snapshot() (calls, events []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), append([]string(nil), r.events...)
}

// run runs script over testTools with a generous budget, in a sandbox a
// Warm had ready, as in runnel serve. (The tests that call Run themselves
// get a sandbox built for the script.)
func run(t *testing.T, r *recorder, script string, opts *Options) Output {
	t.Helper()
	return runIn(t, "warm", r, script, opts)
}

// sandboxKinds are the ways a Run gets its sandbox: "fresh", built for the
// script, and "warm", built before and taken from a Warm.
func sandboxKinds() []string { return []string{"fresh", "warm"} }

// runIn is run in a sandbox of the kind given.
func runIn(t *testing.T, kind string, r *recorder, script string, opts *Options) Output {
	t.Helper()
	o := Options{Timeout: time.Minute}
	if opts != nil {
		o = *opts
	}
	if kind == "fresh" {
		return Run(context.Background(), script, testTools(), r, &o)
	}
	var rec sandboxRecorder
	o.Warm = rec.watch(NewWarm(&WarmOptions{MemoryLimit: o.MemoryLimit}))
	defer o.Warm.Close()
	o.Warm.awaitReady(t)
	out := runWith(context.Background(), script, testTools(), r, &o, rec.hooks())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.used) != 1 || rec.used[0] != rec.built[0] {
		t.Errorf("the script did not get the sandbox the Warm had ready")
	}
	return out
}
