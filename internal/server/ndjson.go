package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/runnel/runnel"
)

// Record kinds of an NDJSON stream (DESIGN §3.5).
const (
	RecordEvent  = "event"
	RecordResult = "result"
)

// Record is one line of an NDJSON stream: `{"kind":"event","event":{…}}`,
// or the one `{"kind":"result","result":{…}}` that ends the stream.
type Record struct {
	Kind   string         `json:"kind"`
	Event  *runnel.Event  `json:"event,omitempty"`
	Result *runnel.Result `json:"result,omitempty"`
}

// NDJSONWriter writes a run as NDJSON records, flushing each line as soon
// as it exists. It is a runnel.Sink; WriteResult writes the closing record,
// after which further events are dropped. It is safe for concurrent use:
// events and keep-alives share one locked path, so lines never interleave.
type NDJSONWriter struct {
	lineWriter
}

// lineWriter is what a streamed answer is written through, NDJSON or
// server-sent events: one locked path for records and keep-alives, a
// write deadline per record, and one report when the client is gone.
type lineWriter struct {
	mu    sync.Mutex
	w     io.Writer
	flush func() error
	start func(status int) // called once, before the first byte
	// deadline, when set, is called before every write: a line that cannot
	// be written before it fails the stream instead of blocking the run.
	deadline func() error
	// gone, when set, is called once when a write fails: the client is
	// gone, or stopped reading, and the run should stop.
	gone    func(error)
	started bool
	closed  bool
	broken  bool      // the destination failed; nothing more is written
	last    time.Time // when the last line was written
	err     error     // the first encoding or write failure
	// kaStopped is set when the keep-alive is stopped; a keep-alive
	// callback that fires later writes nothing.
	kaStopped bool
}

// NewNDJSONWriter returns a writer on w. flush, if not nil, is called after
// every line (an http.ResponseController's Flush, say).
func NewNDJSONWriter(w io.Writer, flush func() error) *NDJSONWriter {
	return &NDJSONWriter{lineWriter{w: w, flush: flush, last: time.Now()}}
}

// Emit writes e as an event record. An event that cannot be encoded is
// skipped and reported by Err.
func (n *NDJSONWriter) Emit(e runnel.Event) {
	// The record is put together around the event's own encoding: the
	// same bytes json.Marshal(Record{…}) writes (Event.MarshalJSON's output
	// is compact and escaped as encoding/json escapes), without a second
	// pass over them. Every streamed piece of a model's answer comes here.
	ev, err := e.MarshalJSON()
	line := make([]byte, 0, len(eventRecordHead)+len(ev)+2)
	line = append(append(append(line, eventRecordHead...), ev...), '}', '\n')
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.fail(fmt.Errorf("encoding a %s event: %w", e.Type, err))
		return
	}
	n.writeLocked(line, http.StatusOK)
}

// eventRecordHead opens an event record: {"kind":"event","event":…}.
const eventRecordHead = `{"kind":"` + RecordEvent + `","event":`

// WriteResult writes res as the closing result record (without its events,
// which the stream already carried) and closes the writer.
func (n *NDJSONWriter) WriteResult(res *runnel.Result) error {
	return n.writeResult(res, http.StatusOK)
}

func (n *NDJSONWriter) writeResult(res *runnel.Result, status int) error {
	r := *res
	r.Events = nil
	line, err := json.Marshal(Record{Kind: RecordResult, Result: &r})
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.fail(fmt.Errorf("encoding the result: %w", err))
	} else {
		n.writeLocked(append(line, '\n'), status)
	}
	n.closed = true
	return n.err
}

// Err returns the first failure to encode or write a record, if any.
func (n *lineWriter) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Started reports whether any byte has been written.
func (n *lineWriter) Started() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.started
}

func (n *lineWriter) fail(err error) {
	if n.err == nil {
		n.err = err
	}
}

// writeLocked writes one line; after a write failure (a client that went
// away) it writes nothing more, since the run is being cancelled anyway.
func (n *lineWriter) writeLocked(line []byte, status int) {
	if n.closed || n.broken {
		return
	}
	if !n.started {
		n.started = true
		if n.start != nil {
			n.start(status)
		}
	}
	n.last = time.Now()
	var err error
	if n.deadline != nil {
		if err = n.deadline(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if err == nil {
		_, err = n.w.Write(line)
	}
	if err == nil && n.flush != nil {
		if err = n.flush(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if err != nil {
		n.broken = true
		n.fail(fmt.Errorf("writing the stream: %w", err))
		if n.gone != nil {
			n.gone(err)
		}
	}
}

// keepAlive writes beat whenever the stream has been silent for
// every, until stop is called; nothing is written after stop returns.
// NDJSON readers skip blank lines; SSE readers skip comments.
//
// It is a timer that re-arms itself rather than a goroutine: a stream that
// waits on its model for minutes would otherwise hold a goroutine and its
// stack for nothing. The callback runs under the writer's lock, and stop
// sets kaStopped under that lock, so a callback already running when stop
// is called either finishes before stop returns or finds the flag set.
func (n *lineWriter) keepAlive(every time.Duration, beat string) (stop func()) {
	var t *time.Timer
	n.mu.Lock()
	defer n.mu.Unlock()
	t = time.AfterFunc(every, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.kaStopped {
			t.Reset(n.beatLocked(every, beat))
		}
	})
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.kaStopped = true
		t.Stop()
	}
}

// beatLocked writes a keep-alive if nothing was written for a whole
// interval and returns how long to wait before looking again.
func (n *lineWriter) beatLocked(every time.Duration, beat string) time.Duration {
	if idle := time.Since(n.last); idle < every {
		return every - idle
	}
	n.writeLocked([]byte(beat), http.StatusOK)
	return every
}

// ndjsonBeat is an NDJSON keep-alive: a blank line, which NDJSON readers
// skip (an unknown record kind could break existing clients).
const ndjsonBeat = "\n"
