//! [`HostKernel`]: CPU kernels written as Rust closures, panic-safe and with checked argument
//! reads ([`HostArgs`]).
//!
//! The C host kernel signature has no user data, so every launch of a Rust kernel passes one
//! hidden argument in front of the caller's: a header with the closure's address, the number
//! of arguments, a tag and each one's size. One C trampoline checks the tag (a launch without
//! the header faults), reads it, calls the closure inside
//! `catch_unwind`, and returns non-zero on an error or a panic, which faults the context as a
//! C kernel returning non-zero does.

use crate::launch_attrs::LaunchAttrs;
use crate::args::{HostHeader, KernelArgs, LaunchConfig, Pod, HOST_HEADER_FIXED, HOST_HEADER_TAG, MAX_HOST_ARGS};
use crate::context::Context;
use crate::error::{check, Error, Result};
use crate::module::Kernel;
use crate::stream::Stream;
use std::ffi::{c_void, CString};
use std::fmt;
use std::mem::size_of;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

/// The error a host kernel closure returns to fault its context (the launch's later work then
/// fails with [`Error::DeviceLost`], and the message names the kernel).
///
/// `Send + Sync`: a unit struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelFault;

impl fmt::Display for KernelFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("host kernel fault")
    }
}

impl std::error::Error for KernelFault {}

/// What a host kernel returns: `Ok(())`, or `Err(KernelFault)` to fault the context.
pub type KernelResult = std::result::Result<(), KernelFault>;

type KernelFn = dyn Fn(&mut Block<'_>, &HostArgs<'_>) -> KernelResult + Send + Sync;

pub(crate) struct HostClosure {
    f: Box<KernelFn>,
}

/// One block of a host kernel launch (`qd_host_kernel_info`).
///
/// `Send + Sync` as plain numbers and a `&mut [u8]` are; it lives for one call of the kernel.
#[derive(Debug)]
pub struct Block<'a> {
    /// This block's index in the grid.
    pub block_idx: [u32; 3],
    /// The grid's size in blocks.
    pub grid_dim: [u32; 3],
    /// The block's size in threads: the kernel loops over them itself.
    pub block_dim: [u32; 3],
    shared: &'a mut [u8],
}

impl Block<'_> {
    /// This block's zeroed scratch ("shared memory") of the launch's `shared_mem_bytes`.
    pub fn shared_mem(&mut self) -> &mut [u8] {
        self.shared
    }
}

/// The arguments of one host kernel launch, read by index with a size check.
///
/// Neither `Send` nor `Sync`: it points into qd's copies of this launch's arguments, valid
/// only during this call of the kernel on this thread.
#[derive(Debug)]
pub struct HostArgs<'a> {
    args: &'a [*mut c_void],
    sizes: &'a [u8],
}

impl HostArgs<'_> {
    /// Number of arguments the launch passed.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether the launch passed no argument.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// The size in bytes of argument `i`.
    pub fn size(&self, i: usize) -> Option<usize> {
        let b = self.sizes.get(i * 4..i * 4 + 4)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// Argument `i` as a `T`. Fails (so that `?` faults the kernel) when there is no argument
    /// `i` or its size is not `size_of::<T>()`.
    pub fn get<T: Pod>(&self, i: usize) -> std::result::Result<T, KernelFault> {
        match (self.args.get(i), self.size(i)) {
            // SAFETY: qd's copy of argument i is `size` bytes at args[i]; T is Pod of that size,
            // so any bytes are a valid T; the copy may be unaligned.
            (Some(p), Some(size)) if size == size_of::<T>() => Ok(unsafe { (*p as *const T).read_unaligned() }),
            _ => Err(KernelFault),
        }
    }
}

/// A CPU kernel written in Rust ([`HostKernel::new`]). It derefs to [`Kernel`], for tasks and
/// pre-packed launches; [`Stream::launch_host`] launches it without `unsafe`, since the closure
/// reads its arguments through checked [`HostArgs::get`].
///
/// Its handle ([`Kernel::raw`]) is for calls such as `qd_kernel_set_param_access` through
/// `qd_sys`: a launch through `qd_sys::qd_launch` lacks the hidden header that every launch of
/// this crate passes first (the module docs), and the kernel then faults its context
/// ([`Error::DeviceLost`], naming the kernel) instead of running the closure. Launch it with
/// [`Stream::launch_host`], [`Stream::launch_host_parallel`] or a [`crate::LaunchPack`].
///
/// `Send + Sync`: as [`Kernel`].
#[derive(Debug)]
pub struct HostKernel<'ctx> {
    kernel: Kernel<'ctx>,
    host: HostRef,
}

// SAFETY: `closure` points to a `HostClosure` (Send + Sync) that the context keeps alive for as
// long as any kernel of it exists; the kernel is Send + Sync.
unsafe impl Send for HostKernel<'_> {}
// SAFETY: as above; nothing mutates through `closure`.
unsafe impl Sync for HostKernel<'_> {}

impl<'ctx> Deref for HostKernel<'ctx> {
    type Target = Kernel<'ctx>;
    fn deref(&self) -> &Kernel<'ctx> {
        &self.kernel
    }
}

impl HostKernel<'_> {
    /// Destroy the handle now, as [`Kernel::close`] (the closure lives until the context is
    /// destroyed, for the work queued with it).
    pub fn close(self) -> Result<()> {
        self.kernel.close()
    }
}

impl<'ctx> HostKernel<'ctx> {
    /// A kernel from a Rust closure or fn (CPU backend only). The closure runs once per block
    /// on the stream's worker thread. A panic inside it is caught (it never unwinds into C)
    /// and faults the context, as `Err(KernelFault)` does. `name` is used in messages.
    /// Errors: [`Error::NotSupported`] on a GPU context.
    ///
    /// The closure lives until the context is destroyed (queued launches may outlive the
    /// kernel handle), so make kernels once, not per launch; and a closure that owns its own
    /// context (an `Arc<Context>`) keeps it alive for ever, a cycle as with `Rc`. (A closure of
    /// [`Stream::host_fn`] runs once and is dropped after: it may hold the last `Arc`.)
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let total = Arc::new(AtomicU32::new(0));
    /// let sink = total.clone();
    /// let add = qd::HostKernel::new(&ctx, "add", move |_block, args| {
    ///     sink.fetch_add(args.get::<u32>(0)?, Ordering::Relaxed);
    ///     Ok(())
    /// })?;
    /// let s = qd::Stream::new(&ctx)?;
    /// s.launch_host(&add, &qd::LaunchConfig::new().grid(3, 1, 1), (5u32,))?;
    /// s.synchronize()?;
    /// assert_eq!(total.load(Ordering::Relaxed), 15);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn new<F>(ctx: &'ctx Context, name: &str, f: F) -> Result<HostKernel<'ctx>>
    where
        F: Fn(&mut Block<'_>, &HostArgs<'_>) -> KernelResult + Send + Sync + 'static,
    {
        let cname = CString::new(name)
            .map_err(|_| Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, "kernel name contains a NUL byte"))?;
        let closure = Arc::new(HostClosure { f: Box::new(f) });
        let ptr = NonNull::from(&*closure);
        // A trampoline of its own when one is free: then the closure's address need not travel
        // with each launch, and a launch without arguments passes none.
        let slot = Slot::take(ptr);
        let entry = slot.as_ref().map_or(trampoline as CKernelFn, |s| SLOT_TRAMPOLINES[s.0]);
        let mut raw = 0;
        // SAFETY: `entry` has the C signature; `cname` is copied by qd; valid output.
        check(unsafe { qd_sys::qd_kernel_from_host_fn(ctx.raw(), Some(entry), cname.as_ptr(), &mut raw) })?;
        let host = HostRef { closure: ptr, slotted: slot.is_some() };
        ctx.keep_alive(closure);
        if let Some(slot) = slot {
            // Given back with the closure, when the context is destroyed (its work drained).
            ctx.keep_alive(Arc::new(slot));
        }
        Ok(HostKernel { kernel: Kernel::from_parts(raw, ctx, Some(host)), host })
    }
}

impl Stream<'_> {
    /// Launch a Rust host kernel. Safe: the closure reads its arguments with a size check,
    /// and any memory it reaches through a [`crate::DevicePtr`] takes `unsafe` in the closure.
    /// Errors: as for [`Stream::launch`].
    #[inline]
    pub fn launch_host<A: KernelArgs>(&self, kernel: &HostKernel<'_>, config: &LaunchConfig, args: A) -> Result<()> {
        launch_host_raw(self.raw(), kernel.raw(), kernel.host, config, None, &args)
    }

    /// [`Stream::launch_host`] with launch attributes (`qd_launch_ex`; [`LaunchAttrs`]).
    /// Errors: as for [`Stream::launch_with`].
    #[inline]
    pub fn launch_host_with<A: KernelArgs>(
        &self,
        kernel: &HostKernel<'_>,
        config: &LaunchConfig,
        attrs: &LaunchAttrs<'_>,
        args: A,
    ) -> Result<()> {
        launch_host_raw(self.raw(), kernel.raw(), kernel.host, config, Some(attrs), &args)
    }
}

/// A Rust host kernel's closure, and whether it has a trampoline of its own (a slot).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostRef {
    pub(crate) closure: NonNull<HostClosure>,
    pub(crate) slotted: bool,
}

impl HostRef {
    /// The header of a launch with `args`, or `None` when the launch passes no argument at all
    /// (no arguments, and a kernel with its own trampoline).
    #[inline(always)]
    pub(crate) fn header<A: KernelArgs>(self) -> Option<HostHeader> {
        if A::COUNT == 0 && self.slotted {
            None
        } else {
            Some(HostHeader::new(if self.slotted { 0 } else { self.closure.as_ptr() as usize as u64 }))
        }
    }
}

/// Queue a launch of a Rust host kernel: its header (if it needs one) and `args`.
#[inline(always)]
pub(crate) fn launch_host_raw<A: KernelArgs>(
    stream: qd_sys::qd_stream,
    kernel: qd_sys::qd_kernel,
    host: HostRef,
    config: &LaunchConfig,
    attrs: Option<&LaunchAttrs<'_>>,
    args: &A,
) -> Result<()> {
    let Some(mut header) = host.header::<A>() else {
        // SAFETY: no arguments; the trampoline runs the closure with none.
        return check(unsafe { launch_raw(stream, kernel, config, attrs, std::ptr::null(), 0) });
    };
    let packed = args.pack_host(&mut header);
    let list = packed.as_slice();
    // SAFETY: `list` holds the header and the caller's arguments, each pointing into `header`
    // or `args` (KernelArg's contract), alive until this returns; qd copies them. The
    // trampoline reads them through HostArgs::get, which checks their sizes.
    check(unsafe { launch_raw(stream, kernel, config, attrs, list.as_ptr(), list.len() as u32) })
}

/// `qd_launch`, or with attributes `qd_launch_ex`.
///
/// # Safety
/// As for `qd_launch`: `args` holds `n` valid entries.
#[inline(always)]
pub(crate) unsafe fn launch_raw(
    stream: qd_sys::qd_stream,
    kernel: qd_sys::qd_kernel,
    config: &LaunchConfig,
    attrs: Option<&LaunchAttrs<'_>>,
    args: *const qd_sys::qd_arg,
    n: u32,
) -> qd_sys::qd_status {
    match attrs {
        None => unsafe { qd_sys::qd_launch(stream, kernel, config.as_raw(), args, n) },
        Some(a) => {
            let (list, count) = a.raw();
            // SAFETY: `list` holds `count` attributes, alive until this returns.
            unsafe { qd_sys::qd_launch_ex(stream, kernel, config.as_raw(), list.as_ptr(), count, args, n) }
        }
    }
}

type CKernelFn = unsafe extern "C" fn(*const qd_sys::qd_host_kernel_info, *const *mut c_void) -> i32;

/// Rust host kernels with a trampoline of their own, at most this many at once (the others
/// pass their closure's address in the header).
const SLOTS: usize = 128;

static SLOT_CLOSURES: [AtomicPtr<HostClosure>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// A slot taken by one closure; given back when dropped.
struct Slot(usize);

impl Slot {
    fn take(closure: NonNull<HostClosure>) -> Option<Slot> {
        SLOT_CLOSURES.iter().position(|c| {
            c.compare_exchange(std::ptr::null_mut(), closure.as_ptr(), Ordering::AcqRel, Ordering::Relaxed).is_ok()
        })
        .map(Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        SLOT_CLOSURES[self.0].store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// The C entry point of the Rust host kernel in slot `I`.
unsafe extern "C" fn slot_trampoline<const I: usize>(info: *const qd_sys::qd_host_kernel_info, args: *const *mut c_void) -> i32 {
    let closure = SLOT_CLOSURES[I].load(Ordering::Acquire);
    // SAFETY: as for `enter`; the slot holds the closure of every kernel made with this entry
    // until the context is destroyed.
    unsafe { enter(Some(closure), info, args) }
}

macro_rules! slot_trampolines {
    ($($i:literal)*) => { [$(slot_trampoline::<$i> as CKernelFn),*] };
}
static SLOT_TRAMPOLINES: [CKernelFn; SLOTS] = slot_trampolines!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
    96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127
);

/// The C entry point of a Rust host kernel without a slot: the header names its closure.
unsafe extern "C" fn trampoline(info: *const qd_sys::qd_host_kernel_info, args: *const *mut c_void) -> i32 {
    // SAFETY: qd's arguments, checked in `enter`.
    unsafe { enter(None, info, args) }
}

/// Run the closure (`slot`'s, else the header's) for one block.
///
/// # Safety
/// `info` and `args` as qd passes them to a host kernel.
unsafe fn enter(slot: Option<*const HostClosure>, info: *const qd_sys::qd_host_kernel_info, args: *const *mut c_void) -> i32 {
    let run = || -> KernelResult {
        // SAFETY: qd passes a valid info for this block and the argument pointers of the launch.
        // A launch through this crate passes the header first (HostHeader), except a launch
        // without arguments of a kernel with a slot, which passes nothing (NULL). One made
        // through qd_sys otherwise has a first argument without the tag, and faults instead of
        // being trusted (the tag is read from at most 16 bytes of qd's copy).
        unsafe {
            let (closure, n, sizes): (*const HostClosure, usize, &[u8]) = if args.is_null() {
                match slot {
                    Some(c) => (c, 0, &[]),
                    None => return Err(KernelFault),
                }
            } else {
                let header = *args as *const u8;
                if header.is_null() || (header.add(12) as *const u32).read_unaligned() != HOST_HEADER_TAG {
                    return Err(KernelFault);
                }
                let closure = slot.unwrap_or_else(|| (header as *const u64).read_unaligned() as usize as *const HostClosure);
                let n = ((header.add(8) as *const u32).read_unaligned() as usize).min(MAX_HOST_ARGS);
                (closure, n, std::slice::from_raw_parts(header.add(HOST_HEADER_FIXED), 4 * n))
            };
            if closure.is_null() {
                return Err(KernelFault);
            }
            let user_args: &[*mut c_void] = if n == 0 { &[] } else { std::slice::from_raw_parts(args.add(1), n) };
            let info = &*info;
            let shared: &mut [u8] = if info.shared_mem.is_null() || info.shared_mem_bytes == 0 {
                &mut []
            } else {
                std::slice::from_raw_parts_mut(info.shared_mem as *mut u8, info.shared_mem_bytes as usize)
            };
            let mut block =
                Block { block_idx: info.block_idx, grid_dim: info.grid_dim, block_dim: info.block_dim, shared };
            ((*closure).f)(&mut block, &HostArgs { args: user_args, sizes })
        }
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(())) => 0,
        Ok(Err(KernelFault)) => 1,
        Err(payload) => {
            // Dropping a panic payload can itself panic; leaking it cannot.
            std::mem::forget(payload);
            2
        }
    }
}
