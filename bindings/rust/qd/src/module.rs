//! [`Module`] and [`Kernel`]: kernels found by name in a loaded image.

use crate::context::Context;
use crate::error::{check, Error, Result};
use crate::host_kernel::HostRef;
use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::path::Path;

/// A loaded module: a shared library of host kernels (CPU) or a PTX/cubin/fatbin/code object
/// image (GPU). `Drop` unloads it; kernels borrow the module, so none outlives it.
///
/// `Send + Sync`: a 64-bit handle plus a borrow of its `Sync` context; qd allows module calls
/// from any thread.
#[derive(Debug)]
pub struct Module<'ctx> {
    raw: qd_sys::qd_module,
    ctx: &'ctx Context,
}

impl<'ctx> Module<'ctx> {
    /// Load a CPU module: the shared library at `path`, whose exported
    /// `qd_host_kernel_fn` functions are kernels. The path must contain a `/` (no library search
    /// path is consulted). Errors: [`Error::NotFound`] when no file is there,
    /// [`Error::InvalidImage`] when the loader rejects it.
    ///
    /// # Safety
    /// Loading runs the library's initialisers, and its kernels run with whatever arguments
    /// they are launched with: load only libraries you trust.
    pub unsafe fn load_library(ctx: &'ctx Context, path: impl AsRef<Path>) -> Result<Module<'ctx>> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_ref().as_os_str().as_bytes();
        // SAFETY: forwarded to the caller.
        unsafe { Self::load_image(ctx, bytes) }
    }

    /// Load a PTX module from its text (a NUL is appended for the driver).
    /// Errors: [`Error::InvalidImage`] when the driver rejects it.
    ///
    /// # Safety
    /// The module's kernels run on the device with whatever arguments they are launched with.
    /// On the CPU backend the "image" is a library path and loading runs its initialisers.
    pub unsafe fn load_ptx(ctx: &'ctx Context, ptx: &str) -> Result<Module<'ctx>> {
        if ptx.as_bytes().contains(&0) {
            return Err(Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, "PTX text contains a NUL byte"));
        }
        let mut text = Vec::with_capacity(ptx.len() + 1);
        text.extend_from_slice(ptx.as_bytes());
        text.push(0);
        // SAFETY: forwarded to the caller.
        unsafe { Self::load_image(ctx, &text) }
    }

    /// Load a module image as given (`qd_module_load`): CPU, a library path; CUDA, PTX
    /// (NUL-terminated), cubin or fatbin; HIP, a code object.
    ///
    /// # Safety
    /// As for [`Module::load_library`] and [`Module::load_ptx`].
    pub unsafe fn load_image(ctx: &'ctx Context, image: &[u8]) -> Result<Module<'ctx>> {
        let mut raw = 0;
        // SAFETY: `image` is valid for its length; `raw` is a valid output.
        check(unsafe {
            qd_sys::qd_module_load(ctx.raw(), image.as_ptr() as *const c_void, image.len() as u64, &mut raw)
        })?;
        Ok(Module { raw, ctx })
    }

    /// The `qd_module` handle; valid while `self` lives.
    pub fn raw(&self) -> qd_sys::qd_module {
        self.raw
    }

    /// Find a kernel by name (CPU: the exported symbol; CUDA: the function name).
    /// Errors: [`Error::NotFound`]; [`Error::InvalidArgument`] for a name with a NUL byte.
    pub fn kernel(&self, name: &str) -> Result<Kernel<'_>> {
        let cname = CString::new(name)
            .map_err(|_| Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, "kernel name contains a NUL byte"))?;
        let mut raw = 0;
        // SAFETY: `cname` is NUL-terminated; `raw` is a valid output.
        check(unsafe { qd_sys::qd_kernel_get(self.raw, cname.as_ptr(), &mut raw) })?;
        Ok(Kernel::from_parts(raw, self.ctx, None))
    }
}

impl Module<'_> {
    /// Unload the module now (`qd_module_unload`; queued work keeps its code until it has
    /// run). `Drop` does the same and keeps a failure for [`Context::take_drop_errors`].
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the handle was ours.
        check(unsafe { qd_sys::qd_module_unload(raw) })
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is ours; queued work keeps the code alive until it completes.
        let status = unsafe { qd_sys::qd_module_unload(self.raw) };
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("Module", status);
        }
    }
}

/// A kernel handle: from a [`Module`] (it borrows the module), or from a Rust closure
/// ([`crate::HostKernel`], it borrows the context). `Drop` destroys the handle; work already
/// queued with it still runs.
///
/// `Send + Sync`: a 64-bit handle, a borrow of a `Sync` context, and (for Rust kernels) a
/// pointer to a `Send + Sync` closure that the context keeps alive.
///
/// A kernel cannot outlive its module:
///
/// ```compile_fail,E0597
/// # fn f(ctx: &qd::Context) -> qd::Result<()> {
/// let kernel;
/// {
///     let module = unsafe { qd::Module::load_library(ctx, "/x/kernels.so")? };
///     kernel = module.kernel("noop")?;
/// } // error: `module` does not live long enough
/// drop(kernel);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Kernel<'a> {
    raw: qd_sys::qd_kernel,
    ctx: &'a Context,
    /// The closure of a Rust host kernel, which every launch passes in front of the arguments.
    pub(crate) host: Option<HostRef>,
    _borrow: PhantomData<&'a ()>,
}

// SAFETY: `host` points to a `HostClosure` (Send + Sync) kept alive by the context for as long as
// any kernel of it exists; everything else is a handle and a shared borrow of a Sync context.
unsafe impl Send for Kernel<'_> {}
// SAFETY: as above; no method mutates through `host`.
unsafe impl Sync for Kernel<'_> {}

/// How a kernel uses the memory a parameter points to ([`Kernel::set_param_access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ParamAccess {
    /// The default: read and written.
    ReadWrite = qd_sys::QD_PARAM_READ_WRITE,
    /// Only read.
    Read = qd_sys::QD_PARAM_READ,
    /// Only written.
    Write = qd_sys::QD_PARAM_WRITE,
    /// Not memory: not checked.
    Ignore = qd_sys::QD_PARAM_IGNORE,
    /// Each launch touches only its own part (chosen by its other arguments).
    Partitioned = qd_sys::QD_PARAM_PARTITIONED,
}

impl<'a> Kernel<'a> {
    pub(crate) fn from_parts(raw: qd_sys::qd_kernel, ctx: &'a Context, host: Option<HostRef>) -> Self {
        Kernel { raw, ctx, host, _borrow: PhantomData }
    }

    /// The `qd_kernel` handle; valid while `self` lives.
    #[inline(always)]
    pub fn raw(&self) -> qd_sys::qd_kernel {
        self.raw
    }

    /// The context the kernel belongs to.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// Declare how the kernel uses the memory its parameter `index` points to, for the
    /// validation mode (`qd_kernel_set_param_access`): with [`ParamAccess::Read`], launches on
    /// several streams reading one buffer are not reported. `index` is the position in the
    /// launch's argument tuple, for a [`crate::HostKernel`] too (its hidden header argument is
    /// not counted). Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an
    /// index of 64 or more (of 16 or more for a `HostKernel`, whose launches take at most 16).
    pub fn set_param_access(&self, index: u32, access: ParamAccess) -> Result<()> {
        let c_index = if self.host.is_some() {
            if index as usize >= crate::args::MAX_HOST_ARGS {
                return Err(Error::with_message(
                    qd_sys::QD_ERROR_INVALID_ARGUMENT,
                    format!("parameter index {index}: a Rust host kernel takes at most {} arguments", crate::args::MAX_HOST_ARGS),
                ));
            }
            // The C launch passes the hidden header as argument 0 (host_kernel.rs).
            index + 1
        } else {
            index
        };
        // SAFETY: plain values and a live kernel handle.
        check(unsafe { qd_sys::qd_kernel_set_param_access(self.raw, c_index, access as u32) })
    }

    /// A kernel from a C host function (CPU backend only), e.g. one written in C and linked
    /// into the program. `name` is used in messages.
    ///
    /// # Safety
    /// `f` runs on a worker thread with the argument bytes of each launch; it must read them
    /// as what the launches pass, and must not unwind.
    pub unsafe fn from_raw_host_fn(
        ctx: &'a Context,
        f: unsafe extern "C" fn(*const qd_sys::qd_host_kernel_info, *const *mut c_void) -> i32,
        name: &str,
    ) -> Result<Kernel<'a>> {
        let cname = CString::new(name)
            .map_err(|_| Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, "kernel name contains a NUL byte"))?;
        let mut raw = 0;
        // SAFETY: `cname` is NUL-terminated and copied by qd; `raw` is a valid output.
        check(unsafe { qd_sys::qd_kernel_from_host_fn(ctx.raw(), Some(f), cname.as_ptr(), &mut raw) })?;
        Ok(Kernel::from_parts(raw, ctx, None))
    }
}

impl Kernel<'_> {
    /// Destroy the handle now (`qd_kernel_destroy`; work queued with it still runs). `Drop`
    /// does the same and keeps a failure for [`Context::take_drop_errors`].
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the handle was ours.
        check(unsafe { qd_sys::qd_kernel_destroy(raw) })
    }
}

impl Drop for Kernel<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is ours; queued work with it still runs.
        let status = unsafe { qd_sys::qd_kernel_destroy(self.raw) };
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("Kernel", status);
        }
    }
}
