// Package qd is the Go binding of qd, an embeddable runtime for GPU streams and events, over its
// C API (libqd, include/qd/qd.h) through cgo. One Go call is one qd call, plus error
// translation and ownership.
//
// # Objects and ownership
//
// Context, Stream, Event, Module, Kernel, DeviceBuffer, HostBuffer and PackedArgs each have an
// idempotent Close. Streams, events, modules, kernels and packed arguments also have a finalizer
// as a safety net, because their destroy returns at once. A Context has none: destroying it
// drains its work, which would block the runtime's single finalizer goroutine. A Context that
// is never closed lives until the process exits (see Context). Device and host buffers have no
// finalizer either: a device free is ordered on a stream, and a host free is immediate while
// copies may still use the memory.
//
// # Streams are explicit
//
// Every call that schedules work is a method of its stream (Launch, Memcpy, RecordEvent, ...),
// and nothing falls back to a default or current stream. qd's active stream is per OS thread,
// and goroutines move between OS threads, so a value set in one goroutine can be read by
// another, or lost: pass streams explicitly, and use Context.WithActiveStream (which locks the
// OS thread for its scope) only for code that must read the active stream.
//
// # Errors
//
// A failed call returns a *Error with the Status and qd's message. The message is thread-local
// in C, so it is read inside the same C call that failed (qdgo.h), never by a second cgo call
// that may run on another thread. Each status has a sentinel (ErrInvalidHandle,
// ErrPoolExhausted, ...), generated from abi/qd-api.json, for errors.Is.
//
// # Memory and cgo's pointer rules
//
// Asynchronous copies run after the call returns, so they take device addresses only: device
// memory (Stream.Alloc) or pinned host memory (Context.HostAlloc). Memcpy and Memset check
// every range against the live blocks allocated through this package (MemcpyPeer's are checked
// by qd against its contexts' allocations), so Go memory, freed blocks and made-up addresses
// are refused with ErrInvalidAddress; copy Go data through a HostBuffer. Closing a context frees its buffers: Bytes is nil and Ptr 0 after. Kernel arguments are values copied
// before Launch returns, so they may live in Go memory; arrays that point at other arrays (the
// task array of LaunchParallel, packed arguments) are built in C memory, since cgo forbids
// passing C Go memory that holds Go pointers. The tests also run under GODEBUG=cgocheck=2.
//
// # Go callbacks
//
// Host callbacks (Stream.LaunchHostFunc) and Go host kernels (Context.NewHostKernel) reach Go
// through runtime/cgo.Handle, which the package keeps exactly as long as work may call it: a
// host callback until it has run (or, captured, until its graph is closed and its replays have
// run), a Go host kernel until it is closed and its launches have run, everything else until
// the context is closed. A panic in one (panic(nil) included) is recovered and becomes a fault
// of the context, as a C host kernel returning non-zero does: later calls return errors
// matching ErrDeviceLost. runtime.Goexit in one ends the process (Go's rule for functions
// called from C); the package prints why first.
//
// # Waiting with a context.Context
//
// Synchronize and Close block until work completes, and qd cannot interrupt them. Their forms
// SynchronizeContext and CloseContext return ctx.Err() once ctx is done, while the wait goes on
// in the background.
package qd
