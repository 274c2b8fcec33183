package codemode

import (
	"errors"

	"modernc.org/quickjs"
)

// sandbox is a VM with the prelude run: everything of a script's sandbox
// that does not depend on the script, so that it can be built before the
// script is known (see Warm). It is handed to exactly one session, which
// installs the script's tools, runs the script and closes it.
//
// A sandbox belongs to one goroutine at a time: the one building it, then
// the session's, to which it is passed over a channel.
type sandbox struct {
	vm *quickjs.VM
	// install, settle, resolve and reject are the prelude's (see
	// prelude); close frees them.
	install, settle, resolve, reject quickjs.Value
	memoryLimit                      int64
	// s is the session the host functions serve, set by attach; nil
	// while the sandbox waits for its script, when nothing calls them.
	s *session
	// closed is set by close, for tests.
	closed bool
}

// newSandbox builds a sandbox whose heap is capped at memoryLimit bytes.
// Its error is the engine's (out of memory while the prelude ran, at a tiny
// limit) or an internal failure.
func newSandbox(memoryLimit int64) (_ *sandbox, err error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, errInternal
	}
	sb := &sandbox{vm: vm, memoryLimit: memoryLimit}
	defer func() {
		if err != nil {
			sb.close()
		}
	}()
	vm.SetMemoryLimit(uintptr(memoryLimit))
	// Atomics.wait would block the goroutine beyond the reach of the
	// interrupt; Atomics is gone anyway, this makes sure.
	vm.SetCanBlock(false)
	vm.SetModuleLoader(refuseImport, nil)
	// Each host function is registered once per VM and reaches the
	// session through sb: the session is not known yet.
	if err := vm.RegisterFunc("__runnel_call", sb.hostCall, false); err != nil {
		return nil, errInternal
	}
	if err := vm.RegisterFunc("__runnel_log", sb.hostLog, false); err != nil {
		return nil, errInternal
	}
	if err := vm.RegisterFunc("__runnel_report", sb.hostReport, false); err != nil {
		return nil, errInternal
	}
	bytecode, err := preludeBytecode()
	if err != nil {
		return nil, errInternal
	}
	// The prelude is fixed code that runs in well under a millisecond: no
	// eval timeout, and no budget to take it from yet.
	setup, err := vm.EvalBytecodeValue(bytecode)
	if err != nil {
		return nil, err
	}
	defer setup.Free()
	fns, err := setup.CallValue(quickjs.UndefinedValue)
	if err != nil {
		return nil, err
	}
	defer fns.Free()
	for _, f := range []struct {
		name string
		to   *quickjs.Value
	}{{"install", &sb.install}, {"settle", &sb.settle}, {"resolve", &sb.resolve}, {"reject", &sb.reject}} {
		atom, err := vm.NewAtom(f.name)
		if err != nil {
			return nil, err
		}
		if *f.to, err = fns.GetPropertyValue(atom); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// errInternal is a sandbox that could not be built for a reason other than
// the engine's own error.
var errInternal = errors.New("internal")

// attach gives the sandbox to s: from now on the host functions serve it.
func (sb *sandbox) attach(s *session) {
	sb.s = s
	s.vm = sb.vm
	s.resolve, s.reject = sb.resolve, sb.reject
}

func (sb *sandbox) hostCall(tool int, args string) quickjs.Value {
	return sb.s.hostCall(tool, args)
}

func (sb *sandbox) hostLog(line string) int { return sb.s.hostLog(line) }

func (sb *sandbox) hostReport(kind, payload string) { sb.s.hostReport(kind, payload) }

// close frees the prelude's functions and closes the VM. A zero Value (one
// the prelude did not get to) is not freed: it belongs to no VM.
func (sb *sandbox) close() {
	for _, v := range []*quickjs.Value{&sb.install, &sb.settle, &sb.resolve, &sb.reject} {
		if v.VM() != nil {
			v.Free()
		}
	}
	sb.vm.Close()
	sb.closed = true
}
