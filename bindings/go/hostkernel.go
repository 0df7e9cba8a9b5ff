package qd

// #include "qdgo.h"
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// HostKernelFunc is the body of a Go host kernel (CPU backend). It is called once per block,
// on a worker thread of the context, and loops over the threads of its block itself. Blocks of
// one launch run one after another; launches on different streams run concurrently, so the
// function must be safe for concurrent use.
//
// Returning a non-nil error is a device fault, as a C host kernel returning non-zero: the
// context becomes lost and later calls return errors matching ErrDeviceLost. A panic is
// recovered and does the same; it never crashes the program.
type HostKernelFunc func(b *HostBlock) error

// HostBlock is what a Go host kernel receives for one block (qd_host_kernel_info and the
// argument values).
type HostBlock struct {
	BlockIdx [3]uint32
	GridDim  [3]uint32
	BlockDim [3]uint32
	// Shared is this block's zeroed scratch of the launch's SharedMemBytes (nil when 0).
	Shared []byte

	kernel string
	args   []unsafe.Pointer
	sizes  []uint32
}

// goKernel is what a Go host kernel's handle refers to. Its references (lifetime.go): the
// Kernel until Close, each launch until its last block has run, each graph that captured a
// launch of it.
type goKernel struct {
	keeper
	fn   HostKernelFunc
	name string
}

// NewHostKernel makes a kernel from a Go function (qd_kernel_from_host_fn; CPU backend only,
// else ErrNotSupported). name is used in messages.
//
// Each launch passes the function's handle as a hidden first argument, so a Go host kernel
// takes at most MaxArgs-1 arguments, and must be launched through this package; indices
// (HostBlock.Arg, Kernel.SetParamAccess) count the function's own arguments from 0. The
// function is released once the kernel is closed and every launch of it has run (the last
// block of each launch lets go of it); a graph that captured a launch keeps it until the graph
// is closed and its replays have run; Close of the context releases what is left (work a lost
// context skipped).
func (c *Context) NewHostKernel(name string, fn HostKernelFunc) (*Kernel, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, newError(StatusInvalidArgument, "host kernel function is nil")
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	gk := &goKernel{fn: fn, name: name}
	gk.ctx = c
	gk.refs.Store(1) // the Kernel's
	gk.gh = c.newHandle(gk)
	kh, err := u64Result(C.gq_kernel_from_go_trampoline(h, cname))
	runtime.KeepAlive(c)
	if err != nil {
		gk.release()
		return nil, err
	}
	k := newKernel(c, kh, nil, name, gk.gh)
	k.goKernel = gk
	return k, nil
}

// runHostKernel is the Go side of gq_host_kernel_trampoline: 0, or 1 for a fault.
func runHostKernel(info *C.qd_host_kernel_info, args *unsafe.Pointer) (status int32) {
	if args == nil || *args == nil {
		return 1 // not launched through this package: no header to find the function by
	}
	header := unsafe.Slice((*byte)(*args), C.GQ_GO_KERNEL_HEADER_FIXED)
	magic := binary.LittleEndian.Uint32(header[8:])
	if magic != C.GQ_GO_KERNEL_MAGIC && magic != C.GQ_GO_KERNEL_MAGIC_CAPTURED {
		return 1
	}
	n := int(binary.LittleEndian.Uint32(header[12:]))
	if n > C.QD_MAX_ARGS-1 {
		return 1
	}
	k, ok := lookupHandle(uintptr(binary.LittleEndian.Uint64(header[0:]))).(*goKernel)
	if !ok {
		return 1 // released: never for work this package queued (lifetime.go)
	}
	returned := false
	defer exitGuard(&returned, fmt.Sprintf("Go host kernel %q", k.name))
	sizes := unsafe.Slice((*uint32)(unsafe.Add(*args, C.GQ_GO_KERNEL_HEADER_FIXED)), n)
	all := unsafe.Slice(args, n+1)
	b := &HostBlock{kernel: k.name, args: all[1:], sizes: sizes}
	for i := 0; i < 3; i++ {
		b.BlockIdx[i] = uint32(info.block_idx[i])
		b.GridDim[i] = uint32(info.grid_dim[i])
		b.BlockDim[i] = uint32(info.block_dim[i])
	}
	if info.shared_mem != nil && info.shared_mem_bytes > 0 {
		b.Shared = unsafe.Slice((*byte)(info.shared_mem), int(info.shared_mem_bytes))
	}
	msg, failed := callGuarded(fmt.Sprintf("Go host kernel %q", k.name), func() error { return k.fn(b) })
	returned = true
	if failed {
		k.ctx.fault(msg) // the context is lost: its Close releases the launch's reference
		return 1
	}
	if magic == C.GQ_GO_KERNEL_MAGIC && lastBlock(info) {
		k.release() // the launch has run (blocks run in row-major order, one after another)
	}
	return 0
}

func lastBlock(info *C.qd_host_kernel_info) bool {
	for i := 0; i < 3; i++ {
		if info.block_idx[i]+1 != info.grid_dim[i] {
			return false
		}
	}
	return true
}

// NumArgs is the number of arguments of the launch.
func (b *HostBlock) NumArgs() int { return len(b.args) }

// Arg is argument i's bytes: a view of qd's copy, valid while the kernel runs. An index out of
// range panics (and so faults the context, with the kernel's name).
func (b *HostBlock) Arg(i int) []byte {
	if i < 0 || i >= len(b.args) {
		panic(fmt.Sprintf("argument %d of %d", i, len(b.args)))
	}
	return unsafe.Slice((*byte)(b.args[i]), b.sizes[i])
}

func (b *HostBlock) sized(i int, size uint32) []byte {
	a := b.Arg(i)
	if uint32(len(a)) != size {
		panic(fmt.Sprintf("argument %d has %d bytes, read as %d", i, len(a), size))
	}
	return a
}

// Typed reads of argument i; a size that differs from the type's panics (a fault).
func (b *HostBlock) Uint32(i int) uint32   { return binary.LittleEndian.Uint32(b.sized(i, 4)) }
func (b *HostBlock) Int32(i int) int32     { return int32(b.Uint32(i)) }
func (b *HostBlock) Uint64(i int) uint64   { return binary.LittleEndian.Uint64(b.sized(i, 8)) }
func (b *HostBlock) Int64(i int) int64     { return int64(b.Uint64(i)) }
func (b *HostBlock) Float32(i int) float32 { return math.Float32frombits(b.Uint32(i)) }
func (b *HostBlock) Float64(i int) float64 { return math.Float64frombits(b.Uint64(i)) }

// Address is argument i read as a device address.
func (b *HostBlock) Address(i int) DevicePtr { return DevicePtr(b.Uint64(i)) }

// Pointer is argument i, a device address, as a pointer: on the CPU backend device memory is
// host memory, so unsafe.Slice((*float32)(b.Pointer(0)), n) is the buffer. It points to C
// memory; never store it in a Go structure that outlives the buffer.
func (b *HostBlock) Pointer(i int) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&b.sized(i, 8)[0]))
}
