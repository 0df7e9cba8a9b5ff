package qd

// The Go functions C calls (through trampolines.c). This file's preamble holds declarations
// only, as cgo requires of files with //export.

// #include <stdint.h>
// #include <qd/qd.h>
import "C"

import "unsafe"

//export qdGoHostFn
func qdGoHostFn(h C.uintptr_t) { runHostCall(uintptr(h)) }

//export qdGoHostStatusFn
func qdGoHostStatusFn(h C.uintptr_t, status C.int32_t) { runHostStatusCall(uintptr(h), int32(status)) }

//export qdGoHostKernel
func qdGoHostKernel(info *C.qd_host_kernel_info, args *unsafe.Pointer) C.int32_t {
	return C.int32_t(runHostKernel(info, args))
}
