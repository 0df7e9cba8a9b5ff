package qd

// #include "qdgo.h"
import "C"

import (
	"fmt"
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
// the body with NextBranch (IF_ELSE, SWITCH) or EndConditional. CPU contexts and CUDA driver
// graphs (driver 12.3 on; 12.8 for IF_ELSE and SWITCH) run conditionals; elsewhere the capture
// refuses them with ErrNotSupported and the reason.
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
// not a CUDA driver graph.
func (s *Stream) ConditionalHandle() (uint64, error) {
	h, err := s.handle()
	if err != nil {
		return 0, err
	}
	v, err := u64Result(C.gq_conditional_handle(h))
	runtime.KeepAlive(s)
	return v, err
}

// If captures then as the body of an IF conditional on s, which must be capturing: at each
// replay the body runs when the uint32 word at condition is not 0. then queues the body's
// work (on s, and on streams that join s there); the conditional is closed when it returns.
// The error is then's, or the first refusal of opening or closing the conditional.
func (s *Stream) If(condition DevicePtr, then func() error) error {
	return s.conditionalBodies(Conditional{Kind: ConditionalIf, Condition: condition}, then)
}

// IfElse is If with an else body: at each replay then runs when the word is not 0, otherwise
// when it is.
func (s *Stream) IfElse(condition DevicePtr, then, otherwise func() error) error {
	return s.conditionalBodies(Conditional{Kind: ConditionalIfElse, Condition: condition}, then,
		otherwise)
}

// While captures body as a WHILE loop on s: at each replay the body runs while the word is not
// 0, deciding before the first iteration and after each one (the body's kernels write it).
func (s *Stream) While(condition DevicePtr, body func() error) error {
	return s.conditionalBodies(Conditional{Kind: ConditionalWhile, Condition: condition}, body)
}

// Switch captures one body per case: at each replay case number word runs, none when the word
// is not below len(cases). At least one case, at most qd.h's QD_MAX_CONDITIONAL_CASES.
func (s *Stream) Switch(condition DevicePtr, cases ...func() error) error {
	return s.conditionalBodies(Conditional{Kind: ConditionalSwitch, Condition: condition,
		NumCases: uint32(len(cases))}, cases...)
}

// conditionalBodies opens c, calls each body in its turn (NextBranch between them) and closes
// it. A body that fails or panics still has the conditional closed behind it (the capture then
// holds whatever it queued): its error is returned, with the closing's own failure (a stream
// that joined the body and has not joined back) added to it.
func (s *Stream) conditionalBodies(c Conditional, bodies ...func() error) (err error) {
	for i, body := range bodies {
		if body == nil {
			return newError(StatusInvalidArgument, "body %d of the conditional is nil", i)
		}
	}
	if c.Kind == ConditionalSwitch && len(bodies) == 0 {
		return newError(StatusInvalidArgument, "a Switch needs at least one case")
	}
	if err := s.BeginConditional(c); err != nil {
		return err
	}
	closed := false
	defer func() {
		if closed {
			return
		}
		if endErr := s.EndConditional(); endErr != nil {
			if err == nil {
				err = endErr
			} else {
				err = fmt.Errorf("%w (and closing the conditional failed: %v)", err, endErr)
			}
		}
	}()
	for i, body := range bodies {
		if i > 0 {
			if err := s.NextBranch(); err != nil {
				return err
			}
		}
		if err := body(); err != nil {
			return err
		}
	}
	closed = true
	return s.EndConditional()
}
