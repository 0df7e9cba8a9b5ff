package qd

// #include "qdgo.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// ConditionalKind is what a conditional decides (qd_conditional_kind).
type ConditionalKind uint32

// The kinds of a conditional (qd.h, "Conditionals").
const (
	// ConditionalIf runs its body when the value is not 0.
	ConditionalIf ConditionalKind = C.QD_CONDITIONAL_IF
	// ConditionalIfElse runs its first body when the value is not 0, else its second.
	ConditionalIfElse ConditionalKind = C.QD_CONDITIONAL_IF_ELSE
	// ConditionalWhile runs its body while the value is not 0, deciding before each iteration.
	ConditionalWhile ConditionalKind = C.QD_CONDITIONAL_WHILE
	// ConditionalSwitch runs case number value, none when value >= NumCases.
	ConditionalSwitch ConditionalKind = C.QD_CONDITIONAL_SWITCH
)

// Conditional describes a branch or loop decided on the device inside a captured graph
// (qd_conditional_desc).
type Conditional struct {
	Kind ConditionalKind
	// NumCases is a ConditionalSwitch's number of bodies; 0 for the other kinds.
	NumCases uint32
	// Condition is the address of the uint32 condition word the graph's kernels write (memory
	// of the context); 0 leaves the value to kernels that set the conditional's handle.
	Condition DevicePtr
}

// BeginConditional opens a conditional on s, which must be capturing
// (qd_stream_begin_conditional): the work queued on s from now on is its first body. Close
// the body with NextBranch (IF_ELSE, SWITCH) or EndConditional. In this release only the CPU
// backend runs conditionals; a GPU context's capture refuses them with ErrNotSupported.
func (s *Stream) BeginConditional(c Conditional) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	var d C.qd_conditional_desc
	d.struct_size = C.uint32_t(unsafe.Sizeof(d))
	d.kind = C.qd_conditional_kind(c.Kind)
	d.num_cases = C.uint32_t(c.NumCases)
	d.condition = C.uint64_t(c.Condition)
	err = resultError(C.gq_stream_begin_conditional(h, &d))
	runtime.KeepAlive(s)
	return err
}

// NextBranch closes the current body of the innermost conditional open on s and opens its
// next one: an IF_ELSE's else body, a SWITCH's next case (qd_stream_next_branch).
func (s *Stream) NextBranch() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_stream_next_branch(h))
	runtime.KeepAlive(s)
	return err
}

// EndConditional closes the innermost conditional open on s: work queued after it follows
// the whole conditional (qd_stream_end_conditional).
func (s *Stream) EndConditional() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_stream_end_conditional(h))
	runtime.KeepAlive(s)
	return err
}

// ConditionalHandle is the native handle of the innermost conditional open on s, for kernels
// that set its value themselves (qd_conditional_handle); ErrNotSupported where the capture is
// not a CUDA driver graph (none is in this release).
func (s *Stream) ConditionalHandle() (uint64, error) {
	h, err := s.handle()
	if err != nil {
		return 0, err
	}
	v, err := u64Result(C.gq_conditional_handle(h))
	runtime.KeepAlive(s)
	return v, err
}
