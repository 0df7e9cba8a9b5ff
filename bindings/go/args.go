package qd

// #include "qdgo.h"
import "C"

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// DevicePtr is a device address (qd's uint64 addresses). On the CPU backend it is a host
// pointer; on GPUs unified addressing applies.
type DevicePtr uint64

// Add is the address off bytes further.
func (p DevicePtr) Add(off uint64) DevicePtr { return p + DevicePtr(off) }

// Arg is one kernel argument value. qd copies argument values when a launch (or PackArgs)
// returns, so the Go values an Arg refers to may change or be collected right after that.
// The zero Arg is invalid.
type Arg struct {
	size uint32
	bits uint64         // the value, for the scalar constructors
	ptr  unsafe.Pointer // the bytes, for Value and Bytes (nil for scalars)
	mem  bool           // ptr/size hold the value
}

func scalar(size uint32, bits uint64) Arg { return Arg{size: size, bits: bits} }

// Scalar arguments, passed by value in the size of their Go type.
func Uint8(v uint8) Arg     { return scalar(1, uint64(v)) }
func Int8(v int8) Arg       { return scalar(1, uint64(uint8(v))) }
func Uint16(v uint16) Arg   { return scalar(2, uint64(v)) }
func Int16(v int16) Arg     { return scalar(2, uint64(uint16(v))) }
func Uint32(v uint32) Arg   { return scalar(4, uint64(v)) }
func Int32(v int32) Arg     { return scalar(4, uint64(uint32(v))) }
func Uint64(v uint64) Arg   { return scalar(8, v) }
func Int64(v int64) Arg     { return scalar(8, uint64(v)) }
func Float32(v float32) Arg { return scalar(4, uint64(math.Float32bits(v))) }
func Float64(v float64) Arg { return scalar(8, math.Float64bits(v)) }

// Address is a device address argument (8 bytes), e.g. DeviceBuffer.Ptr or HostBuffer.Ptr.
func Address(p DevicePtr) Arg { return scalar(8, uint64(p)) }

// Value is an argument of size bytes read from p, e.g. a struct:
// qd.Value(unsafe.Pointer(&params), unsafe.Sizeof(params)). The bytes are copied at the launch,
// so p only has to be valid during the call. The struct must hold no Go pointers (a kernel
// cannot use them); its layout must be the one the kernel expects (Go lays out fixed-size
// fields as C does on this platform).
func Value(p unsafe.Pointer, size uintptr) Arg {
	if size > math.MaxUint32 {
		size = math.MaxUint32
	}
	return Arg{size: uint32(size), ptr: p, mem: true}
}

// Bytes is an argument of the bytes of b (by value, len(b) bytes).
func Bytes(b []byte) Arg {
	if len(b) == 0 {
		return Arg{mem: true}
	}
	return Value(unsafe.Pointer(&b[0]), uintptr(len(b)))
}

// argBlob is where a launch packs its arguments before the one C call: back to back, with
// their sizes. It lives in Go memory without pointers, so passing it to C is allowed.
type argBlob struct {
	config C.qd_launch_config
	sizes  [C.QD_MAX_ARGS]C.uint32_t
	data   [C.QD_MAX_ARG_BYTES]byte
}

var argBlobs = sync.Pool{New: func() interface{} { return new(argBlob) }}

// validateArgs checks what qd cannot see through the packing (the Go-side values themselves),
// and the count and total size before any copy, so that a huge Value is refused, not read.
func validateArgs(args []Arg, lead int) error {
	if len(args)+lead > C.QD_MAX_ARGS {
		return newError(StatusInvalidArgument, "%d arguments: at most QD_MAX_ARGS (%d)%s",
			len(args), C.QD_MAX_ARGS-lead, goKernelNote(lead))
	}
	total := uint64(0)
	for i, a := range args {
		total += uint64(a.size)
		if !a.mem && a.size == 0 {
			return newError(StatusInvalidArgument, "argument %d is the zero qd.Arg", i)
		}
		if a.mem && a.ptr == nil && a.size > 0 {
			return newError(StatusInvalidArgument, "argument %d: nil pointer with size %d", i, a.size)
		}
	}
	if total > C.QD_MAX_ARG_BYTES {
		return newError(StatusOverflow, "the arguments' total size (%d bytes) exceeds QD_MAX_ARG_BYTES (%d)", total, C.QD_MAX_ARG_BYTES)
	}
	return nil
}

func goKernelNote(lead int) string {
	if lead > 0 {
		return " (a Go host kernel uses one itself)"
	}
	return ""
}

// copyArg writes a's bytes to dst (len(dst) == a.size).
func copyArg(dst []byte, a Arg) {
	if a.mem {
		copy(dst, unsafe.Slice((*byte)(a.ptr), a.size))
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], a.bits)
	copy(dst, b[:a.size])
}

// goKernelHeader is the hidden first argument of a Go host kernel's launch (gq_go_kernel_header:
// handle, magic, argument count, sizes), 16 + 4n bytes.
func goKernelHeaderSize(n int) uint32 { return C.GQ_GO_KERNEL_HEADER_FIXED + 4*uint32(n) }

func putGoKernelHeader(dst []byte, k *Kernel, sizes func(i int) uint32, n int) {
	binary.LittleEndian.PutUint64(dst[0:], uint64(k.goFn))
	binary.LittleEndian.PutUint32(dst[8:], C.GQ_GO_KERNEL_MAGIC)
	binary.LittleEndian.PutUint32(dst[12:], uint32(n))
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(dst[16+4*i:], sizes(i))
	}
}

// pack lays out k's launch arguments in b and returns their count (with a Go kernel's header).
func (b *argBlob) pack(k *Kernel, args []Arg) (int, error) {
	lead := 0
	if k.goFn != 0 {
		lead = 1
	}
	if err := validateArgs(args, lead); err != nil {
		return 0, err
	}
	off, n := uint64(0), 0
	put := func(size uint32) ([]byte, error) {
		if off+uint64(size) > uint64(len(b.data)) {
			return nil, newError(StatusOverflow,
				"the arguments' total size exceeds QD_MAX_ARG_BYTES (%d)%s", C.QD_MAX_ARG_BYTES, goKernelNote(lead))
		}
		dst := b.data[off : off+uint64(size)]
		b.sizes[n] = C.uint32_t(size)
		off += uint64(size)
		n++
		return dst, nil
	}
	if lead == 1 {
		dst, err := put(goKernelHeaderSize(len(args)))
		if err != nil {
			return 0, err
		}
		putGoKernelHeader(dst, k, func(i int) uint32 { return args[i].size }, len(args))
	}
	for _, a := range args {
		dst, err := put(a.size)
		if err != nil {
			return 0, err
		}
		copyArg(dst, a)
	}
	return n, nil
}

// PackedArgs are kernel arguments packed once into C memory, for launches that reuse them
// (LaunchPacked, Task.Packed): such a launch copies no Go values. Close frees them; a finalizer
// frees packs that were never closed. Safe for concurrent launches.
type PackedArgs struct {
	mu    sync.RWMutex
	mem   unsafe.Pointer // C memory: qd_arg[n], then the values; nil once closed
	n     int
	sizes []uint32
}

// PackArgs packs args into C memory (the qd_arg array and the values behind it).
func PackArgs(args ...Arg) (*PackedArgs, error) {
	if err := validateArgs(args, 0); err != nil {
		return nil, err
	}
	head := uintptr(len(args)) * C.sizeof_qd_arg
	total, values := head, uint64(0)
	for _, a := range args {
		total += (uintptr(a.size) + 7) &^ 7
		values += uint64(a.size)
	}
	if values > C.QD_MAX_ARG_BYTES {
		return nil, newError(StatusOverflow, "the arguments' total size exceeds QD_MAX_ARG_BYTES (%d)", C.QD_MAX_ARG_BYTES)
	}
	p := &PackedArgs{n: len(args), sizes: make([]uint32, len(args))}
	if len(args) == 0 {
		return p, nil
	}
	mem := C.calloc(1, C.size_t(total))
	if mem == nil {
		return nil, newError(StatusOutOfMemory, "no memory for %d bytes of packed arguments", total)
	}
	entries := unsafe.Slice((*C.qd_arg)(mem), len(args))
	off := head
	for i, a := range args {
		data := unsafe.Add(mem, off)
		copyArg(unsafe.Slice((*byte)(data), a.size), a)
		entries[i].data = data
		entries[i].size = C.uint64_t(a.size)
		p.sizes[i] = a.size
		off += (uintptr(a.size) + 7) &^ 7
	}
	p.mem = mem
	runtime.SetFinalizer(p, (*PackedArgs).Close)
	return p, nil
}

// Len is the number of packed arguments.
func (p *PackedArgs) Len() int { return p.n }

// Close frees the packed arguments. Launches already made are unaffected (qd copied the
// values). Idempotent.
func (p *PackedArgs) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mem != nil {
		C.free(p.mem)
		p.mem = nil
	}
	p.n = -1
	runtime.SetFinalizer(p, nil)
	return nil
}

// entries is the C qd_arg array (nil for no arguments); the caller holds p.mu for reading.
func (p *PackedArgs) entries() (*C.qd_arg, error) {
	if p == nil {
		return nil, newError(StatusInvalidArgument, "packed arguments are nil")
	}
	if p.n < 0 {
		return nil, newError(StatusInvalidArgument, "packed arguments were closed")
	}
	return (*C.qd_arg)(p.mem), nil
}
