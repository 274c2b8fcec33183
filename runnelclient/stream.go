package runnelclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/runnel/runnel"
	"github.com/runnel/runnel/internal/strictjson"
)

// record is one line of an NDJSON answer.
type record struct {
	Kind   string         `json:"kind"`
	Event  *runnel.Event  `json:"event"`
	Result *runnel.Result `json:"result"`
}

// Stream runs req as an NDJSON stream: it calls fn (when not nil) with
// each event as it arrives, in order, on the calling goroutine, and
// returns the closing result. Blank keep-alive lines are skipped; events
// of types this package does not know are passed on for fn to skip.
//
// runnel reports a refused or failed run inside the stream: the result
// then has OK false, with Error and ErrorCode, and the error is nil. Only
// what runnel decides before the run (undecodable JSON, authentication,
// size, capacity) is an *Error. A line that is not a record, a line longer
// than the client's bound, a record after the result, and a stream that
// ends without its result (a cut connection) are errors too.
func (c *Client) Stream(ctx context.Context, req *runnel.RunRequest, fn func(runnel.Event)) (*runnel.Result, error) {
	resp, err := c.post(ctx, "/run", req, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if mt := mediaType(resp); mt != "application/x-ndjson" {
		return nil, fmt.Errorf("runnel: /run answered %q, not application/x-ndjson", mt)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), c.maxBytes)
	var res *runnel.Result
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue // a keep-alive
		}
		if res != nil {
			return nil, fmt.Errorf("runnel: stream line %d: a record after the result", n)
		}
		var rec record
		if err := strictjson.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("runnel: stream line %d is not a record: %w", n, err)
		}
		switch {
		case rec.Kind == "event" && rec.Event != nil && rec.Result == nil:
			if fn != nil {
				fn(*rec.Event)
			}
		case rec.Kind == "result" && rec.Result != nil && rec.Event == nil:
			res = rec.Result
		default:
			return nil, fmt.Errorf("runnel: stream line %d is neither an event nor a result record", n)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("runnel: a stream line is longer than %d bytes: %w", c.maxBytes, err)
	} else if err != nil {
		return nil, fmt.Errorf("runnel: reading the stream: %w", err)
	}
	if res == nil {
		return nil, errors.New("runnel: the stream ended without its result record: the connection was cut or the server went away")
	}
	return res, nil
}
