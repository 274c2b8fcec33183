package codemode

import (
	"sync"
)

// DefaultWarmSize is how many sandboxes a Warm keeps ready by default.
const DefaultWarmSize = 1

// WarmOptions configures NewWarm. A zero or negative field means its
// default.
type WarmOptions struct {
	// Size is how many sandboxes are kept ready (default DefaultWarmSize):
	// as many scripts as that can start at once without building one.
	Size int
	// MemoryLimit is the heap cap of the sandboxes kept ready (default
	// DefaultMemoryLimit); a script whose Options.MemoryLimit differs gets
	// a sandbox built for it.
	MemoryLimit int64
}

// Warm takes the building and the closing of sandboxes off the path of the
// scripts: it keeps fresh sandboxes ready before scripts ask for them, so
// that a script does not wait for its VM to be built and the prelude to
// run, and it closes each sandbox after its Run has returned. Each sandbox
// is built for no script in particular, handed to exactly one Run, and
// closed when that Run ends: a Warm never hands a sandbox out twice, and
// nothing a script does reaches another. Taking one starts building its
// replacement in the background, while the script runs. A script that
// finds none ready, or whose memory limit is not the Warm's, gets one built
// for it, as without a Warm.
//
// The building starts with the first Run given the Warm, so that a process
// that runs no script pays nothing for it; from then on the Warm holds Size
// idle VMs (a few hundred KiB each), and up to Size more that wait to be
// closed (each up to its memory limit). Create one per process, in main,
// give it to every Run through Options.Warm, and Close it at shutdown. A
// Warm is safe for concurrent use.
type Warm struct {
	size        int
	memoryLimit int64
	// ready holds the sandboxes built and not taken. room holds a token
	// for each sandbox that may be built: the tokens, the sandboxes being
	// built and those ready are size together, so neither channel ever
	// blocks a send.
	ready chan *sandbox
	room  chan struct{}
	// retired holds the sandboxes whose Run has ended, for fill to close;
	// closing counts them until they are closed, for tests to wait on.
	retired chan *sandbox
	closing sync.WaitGroup
	quit    chan struct{}
	wg      sync.WaitGroup
	// built, set by tests, sees each sandbox fill builds.
	built func(*sandbox)

	mu      sync.Mutex
	started bool
	closed  bool
}

// NewWarm returns a Warm; opts may be nil.
func NewWarm(opts *WarmOptions) *Warm {
	size, memoryLimit := DefaultWarmSize, int64(DefaultMemoryLimit)
	if opts != nil && opts.Size > 0 {
		size = opts.Size
	}
	if opts != nil && opts.MemoryLimit > 0 {
		memoryLimit = opts.MemoryLimit
	}
	w := &Warm{
		size:        size,
		memoryLimit: memoryLimit,
		ready:       make(chan *sandbox, size),
		room:        make(chan struct{}, size),
		retired:     make(chan *sandbox, size),
		quit:        make(chan struct{}),
	}
	for range size {
		w.room <- struct{}{}
	}
	return w
}

// Close stops the building, closes the sandboxes kept ready and those
// waiting to be closed, and returns once they are closed. Runs under way
// keep theirs and close them themselves; later Runs build their own. Close
// can be called more than once, and on a nil Warm.
func (w *Warm) Close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
	for {
		select {
		case sb := <-w.ready:
			sb.close()
		case sb := <-w.retired:
			w.closeRetired(sb)
		default:
			return nil
		}
	}
}

// retire closes the sandbox of a Run that has ended: without a Warm, or
// once it is closed, or when Size sandboxes already wait, at once; otherwise
// fill closes it.
func (w *Warm) retire(sb *sandbox) {
	if w == nil {
		sb.close()
		return
	}
	// Under mu, so that no sandbox joins retired after Close emptied it.
	w.mu.Lock()
	handed := false
	if !w.closed {
		w.closing.Add(1)
		select {
		case w.retired <- sb:
			handed = true
		default:
			w.closing.Done()
		}
	}
	w.mu.Unlock()
	if !handed {
		sb.close()
	}
}

func (w *Warm) closeRetired(sb *sandbox) {
	sb.close()
	w.closing.Done()
}

// take returns a sandbox ready for a script whose heap is capped at
// memoryLimit, or nil: no Warm, another limit, none ready yet, or the Warm
// closed. The first take starts the building; each take that gets one
// makes room for its replacement.
func (w *Warm) take(memoryLimit int64) *sandbox {
	if w == nil || memoryLimit != w.memoryLimit {
		return nil
	}
	if !w.start() {
		return nil
	}
	select {
	case sb := <-w.ready:
		w.room <- struct{}{}
		return sb
	default:
		return nil
	}
}

// start starts the building unless it has started already, and reports
// whether the Warm is open.
func (w *Warm) start() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if !w.started {
		w.started = true
		w.wg.Add(1)
		go w.fill()
	}
	return true
}

// fill closes the sandboxes retired and builds one whenever there is room,
// until the Warm is closed. If a sandbox cannot be built it builds no more:
// Runs then build their own, and meet the failure themselves.
func (w *Warm) fill() {
	defer w.wg.Done()
	building := true
	for {
		// quit, then retired first: a select with several cases ready
		// picks at random. Closing first frees memory first.
		select {
		case <-w.quit:
			return
		case sb := <-w.retired:
			w.closeRetired(sb)
			continue
		default:
		}
		room := w.room
		if !building {
			room = nil
		}
		select {
		case <-w.quit:
			return
		case sb := <-w.retired:
			w.closeRetired(sb)
			continue
		case <-room:
		}
		sb, err := newSandbox(w.memoryLimit)
		if err != nil {
			building = false
			continue
		}
		if w.built != nil {
			w.built(sb)
		}
		w.ready <- sb
	}
}
