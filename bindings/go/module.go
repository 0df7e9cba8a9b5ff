package qd

// #include "qdgo.h"
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// Module is a loaded module (qd_module): on the CPU backend a shared library whose exported
// functions are host kernels; on CUDA PTX, cubin or fatbin; on HIP a code object. It has a
// finalizer that unloads a module that was never closed (unload returns at once; queued work
// keeps the code alive until it completes).
type Module struct {
	h   atomic.Uint64
	ctx *Context
}

// LoadModule loads the CPU module at path (qd_module_load with the path as the image). The
// path must contain a '/' (e.g. "./kernels.so"), so that no library search path is consulted.
func (c *Context) LoadModule(path string) (*Module, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	mh, err := u64Result(C.gq_module_load(h, unsafe.Pointer(cpath), C.uint64_t(len(path))))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newModule(c, mh), nil
}

// LoadModuleImage loads a GPU module image (qd_module_load): PTX text, cubin or fatbin on
// CUDA, a code object on HIP. A NUL is appended when the image does not end in one (PTX must
// be NUL-terminated). qd reads the image during the call; it is not kept.
func (c *Context) LoadModuleImage(image []byte) (*Module, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, newError(StatusInvalidArgument, "module image is empty")
	}
	if image[len(image)-1] != 0 {
		image = append(image[:len(image):len(image)], 0)
	}
	mh, err := u64Result(C.gq_module_load(h, unsafe.Pointer(&image[0]), C.uint64_t(len(image))))
	runtime.KeepAlive(c)
	runtime.KeepAlive(image)
	if err != nil {
		return nil, err
	}
	return newModule(c, mh), nil
}

func newModule(c *Context, h uint64) *Module {
	m := &Module{ctx: c}
	m.h.Store(h)
	runtime.SetFinalizer(m, (*Module).finalize)
	return m
}

// Handle is the qd_module handle (0 once closed).
func (m *Module) Handle() uint64 { return m.h.Load() }

// Close unloads the module (qd_module_unload); its kernels' handles become invalid, while work
// already queued still runs. Idempotent; nil when the context was closed first.
func (m *Module) Close() error {
	h := m.h.Swap(0)
	if h == 0 {
		return nil
	}
	runtime.SetFinalizer(m, nil)
	err := resultError(C.gq_module_unload(C.qd_module(h)))
	if err != nil && m.ctx.childClosed(err) {
		return nil
	}
	return err
}

func (m *Module) finalize() {
	if h := m.h.Swap(0); h != 0 {
		_ = resultError(C.gq_module_unload(C.qd_module(h)))
	}
}

// Kernel finds a kernel by name (qd_kernel_get): the exported symbol on the CPU backend, the
// function name on CUDA. Each call returns a new kernel.
func (m *Module) Kernel(name string) (*Kernel, error) {
	if m == nil {
		return nil, errNil("module")
	}
	h := m.h.Load()
	if h == 0 {
		return nil, errClosed("module")
	}
	if e := m.ctx.lost.Load(); e != nil {
		return nil, e
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	kh, err := u64Result(C.gq_kernel_get(C.qd_module(h), cname))
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	return newKernel(m.ctx, kh, m, name, 0), nil
}

// Kernel is a kernel (qd_kernel): from a module (Module.Kernel) or a Go function
// (Context.NewHostKernel). It has a finalizer that destroys a kernel that was never closed
// (destroy returns at once; queued work still runs).
type Kernel struct {
	h      atomic.Uint64
	ctx    *Context
	module *Module // keeps the module (and so the kernel's code) from its finalizer
	name   string
	goFn   cgo.Handle // the Go function of a host kernel, else 0

	goKernel *goKernel // a Go host kernel's function, else nil; Close lets go of it
}

func newKernel(c *Context, h uint64, m *Module, name string, goFn cgo.Handle) *Kernel {
	k := &Kernel{ctx: c, module: m, name: name, goFn: goFn}
	k.h.Store(h)
	runtime.SetFinalizer(k, (*Kernel).finalize)
	return k
}

// Name is the name the kernel was found or made with.
func (k *Kernel) Name() string { return k.name }

// Handle is the qd_kernel handle (0 once closed). A Go host kernel's handle must be launched
// through this package, which passes the Go function along with the arguments.
func (k *Kernel) Handle() uint64 { return k.h.Load() }

// ParamAccess says how a kernel uses the memory a parameter points to (qd_param_access).
type ParamAccess uint32

const (
	ParamReadWrite ParamAccess = C.QD_PARAM_READ_WRITE // the default
	ParamRead      ParamAccess = C.QD_PARAM_READ       // only read: reads on several streams are fine
	ParamWrite     ParamAccess = C.QD_PARAM_WRITE      // only written
	ParamIgnore    ParamAccess = C.QD_PARAM_IGNORE     // not memory: not checked
	// ParamPartitioned: each launch touches only its own part, chosen by its other arguments.
	ParamPartitioned ParamAccess = C.QD_PARAM_PARTITIONED
)

// SetParamAccess declares, for the validation mode, how the kernel uses the memory its
// parameter index points to (qd_kernel_set_param_access). index counts the kernel's own
// parameters from 0, as its launches pass them (for a Go host kernel: as HostBlock reads them;
// the package's hidden first argument is not counted). ErrInvalidArgument for an index of 64
// or more (63 or more for a Go host kernel) or an unknown access.
func (k *Kernel) SetParamAccess(index uint32, access ParamAccess) error {
	h, err := k.handle()
	if err != nil {
		return err
	}
	if k.goFn != 0 {
		if index >= C.QD_MAX_ARGS-1 {
			return newError(StatusInvalidArgument, "parameter index %d: a Go host kernel has at most %d parameters (0 to %d)",
				index, C.QD_MAX_ARGS-1, C.QD_MAX_ARGS-2)
		}
		index++ // C's parameter 0 is the hidden header
	}
	err = resultError(C.gq_kernel_set_param_access(h, C.uint32_t(index), C.uint32_t(access)))
	runtime.KeepAlive(k)
	return err
}

func (k *Kernel) handle() (C.qd_kernel, error) {
	if k == nil {
		return 0, errNil("kernel")
	}
	h := k.h.Load()
	if h == 0 {
		return 0, errClosed("kernel")
	}
	return C.qd_kernel(h), nil
}

// Close destroys the kernel handle (qd_kernel_destroy); work already queued with it still
// runs. Idempotent; nil when the context (or the kernel's module) was closed first.
func (k *Kernel) Close() error {
	if k == nil {
		return nil
	}
	h := k.h.Swap(0)
	if h == 0 {
		return nil
	}
	runtime.SetFinalizer(k, nil)
	err := resultError(C.gq_kernel_destroy(C.qd_kernel(h)))
	if k.goKernel != nil {
		k.goKernel.release() // launches still queued or captured hold their own references
	}
	if err != nil && (k.ctx.childClosed(err) || (k.module != nil && k.module.h.Load() == 0)) {
		return nil
	}
	return err
}

func (k *Kernel) finalize() {
	if h := k.h.Swap(0); h != 0 {
		_ = resultError(C.gq_kernel_destroy(C.qd_kernel(h)))
		if k.goKernel != nil {
			k.goKernel.release()
		}
	}
}

// launching takes a launch's reference to a Go host kernel's function before the launch is
// queued (its blocks may run before the launch call returns); launched settles it from the
// outcome: a refused launch gives it back, a captured one hands it to the capture.
func (k *Kernel) launching() {
	if k.goKernel != nil {
		k.goKernel.acquire()
	}
}

func (k *Kernel) launched(r C.gq_result) error {
	if k.goKernel != nil {
		if r.status != 0 {
			k.goKernel.release()
		} else if r.captured != 0 {
			k.ctx.adoptCaptured(k.goKernel)
		}
	}
	if r.status != 0 {
		return statusError(r.status, r.msg)
	}
	return nil
}
