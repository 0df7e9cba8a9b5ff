//! Launches: [`Stream::launch`], pre-packed [`LaunchPack`]s, and [`Stream::launch_parallel`]
//! with [`Task`]s.

use crate::args::{KernelArgs, LaunchConfig};
use crate::error::{check, Result};
use crate::host_kernel::HostKernel;
use crate::launch_attrs::LaunchAttrs;
use crate::module::Kernel;
use crate::stream::Stream;
use qd_sys::qd_arg;
use std::ffi::c_void;
use std::marker::PhantomData;

impl Stream<'_> {
    /// Queue `kernel` on this stream with `config` and `args` (`qd_launch`). The argument
    /// values are copied before this returns, so the caller may change them at once.
    ///
    /// Errors: [`crate::Error::InvalidArgument`] for a zero dimension or more than
    /// `QD_MAX_ARGS` arguments, [`crate::Error::Overflow`] for more than `QD_MAX_ARG_BYTES`,
    /// [`crate::Error::WrongContext`] for a kernel of another context,
    /// [`crate::Error::DeviceLost`] after a fault.
    ///
    /// # Safety
    /// The kernel reads its arguments as the types it was written for and uses the memory they
    /// point to: `args` must match its parameters, and that memory must stay valid (not freed,
    /// not written by the host) until the kernel has run. For Rust kernels
    /// ([`crate::HostKernel`]) prefer the safe [`Stream::launch_host`].
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let noop = qd::HostKernel::new(&ctx, "noop", |_, _| Ok(()))?;
    /// // SAFETY: the kernel takes no arguments and touches no memory.
    /// unsafe { s.launch(&noop, &qd::LaunchConfig::new(), ())? };
    /// s.synchronize()?;
    /// # Ok::<(), qd::Error>(())
    /// ```
    #[inline]
    pub unsafe fn launch<A: KernelArgs>(&self, kernel: &Kernel<'_>, config: &LaunchConfig, args: A) -> Result<()> {
        if let Some(host) = kernel.host {
            return crate::host_kernel::launch_host_raw(self.raw(), kernel.raw(), host, config, None, &args);
        }
        let packed = args.pack();
        let list = packed.as_ref();
        let cfg = config.as_raw();
        // SAFETY: `list` entries point into `args`, alive until this returns; qd copies them.
        check(unsafe { qd_sys::qd_launch(self.raw(), kernel.raw(), cfg, list.as_ptr(), list.len() as u32) })
    }

    /// [`Stream::launch`] with launch attributes (`qd_launch_ex`; [`LaunchAttrs`]).
    ///
    /// Errors: as for [`Stream::launch`], plus [`crate::Error::InvalidArgument`] for a cluster
    /// dimension of 0 or one that does not divide the grid, [`crate::Error::WrongContext`] for
    /// a completion event of another context, and [`crate::Error::NotSupported`] for an
    /// attribute the backend or device cannot honour (the message names it).
    ///
    /// # Safety
    /// As for [`Stream::launch`].
    #[inline]
    pub unsafe fn launch_with<A: KernelArgs>(
        &self,
        kernel: &Kernel<'_>,
        config: &LaunchConfig,
        attrs: &LaunchAttrs<'_>,
        args: A,
    ) -> Result<()> {
        if let Some(host) = kernel.host {
            return crate::host_kernel::launch_host_raw(self.raw(), kernel.raw(), host, config, Some(attrs), &args);
        }
        let packed = args.pack();
        let list = packed.as_ref();
        // SAFETY: `list` entries point into `args`, alive until this returns; qd copies them.
        check(unsafe { crate::host_kernel::launch_raw(self.raw(), kernel.raw(), config, Some(attrs), list.as_ptr(), list.len() as u32) })
    }

    /// Stream-parallel launch (`qd_launch_parallel`): tasks of one group run in order on one
    /// pooled stream; groups run concurrently. Every task starts after the work already queued
    /// here, and this stream waits for all of them (pooled events; no host synchronisation).
    /// Every task is validated before anything is queued. Errors: as for [`Stream::launch`],
    /// plus [`crate::Error::PoolExhausted`] when no pool stream is free.
    ///
    /// # Safety
    /// As for [`Stream::launch`], for every task.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let hits = Arc::new(AtomicU32::new(0));
    /// let h = hits.clone();
    /// let count = qd::HostKernel::new(&ctx, "count", move |_, _| { h.fetch_add(1, Ordering::Relaxed); Ok(()) })?;
    /// let cfg = qd::LaunchConfig::new();
    /// let tasks: Vec<qd::Task> = (0..8).map(|i| qd::Task::new(&count, i % 4, &cfg, ())).collect();
    /// let s = qd::Stream::new(&ctx)?;
    /// // SAFETY: the kernel reads no argument.
    /// unsafe { s.launch_parallel(&tasks)? };
    /// s.synchronize()?;
    /// assert_eq!(hits.load(Ordering::Relaxed), 8);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub unsafe fn launch_parallel(&self, tasks: &[Task<'_>]) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.launch_tasks(tasks.iter()) }
    }

    /// Stream-parallel launch of Rust host kernels ([`HostTask`]s), as
    /// [`Stream::launch_parallel`]; safe as [`Stream::launch_host`] is.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let sum = Arc::new(AtomicU32::new(0));
    /// let s2 = sum.clone();
    /// let add = qd::HostKernel::new(&ctx, "add", move |_, args| { s2.fetch_add(args.get::<u32>(0)?, Ordering::Relaxed); Ok(()) })?;
    /// let cfg = qd::LaunchConfig::new();
    /// let tasks: Vec<qd::HostTask> = (0..8).map(|i| qd::HostTask::new(&add, i % 4, &cfg, (i,))).collect();
    /// let s = qd::Stream::new(&ctx)?;
    /// s.launch_host_parallel(&tasks)?;
    /// s.synchronize()?;
    /// assert_eq!(sum.load(Ordering::Relaxed), 28);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn launch_host_parallel(&self, tasks: &[HostTask<'_>]) -> Result<()> {
        // SAFETY: every task is a Rust host kernel, which reads its arguments through the
        // checked HostArgs::get (as Stream::launch_host).
        unsafe { self.launch_tasks(tasks.iter().map(|t| &t.task)) }
    }

    unsafe fn launch_tasks<'a, 'k: 'a>(&self, tasks: impl Iterator<Item = &'a Task<'k>>) -> Result<()> {
        let raw: Vec<qd_sys::qd_task> = tasks
            .map(|t| qd_sys::qd_task {
                group: t.group,
                kernel: t.pack.kernel,
                config: t.pack.config,
                args: t.pack.args.as_ptr(),
                num_args: t.pack.args.len() as u32,
                attrs: if t.num_attrs == 0 { std::ptr::null() } else { t.attrs.as_ptr() },
                num_attrs: t.num_attrs,
                ..qd_sys::QD_TASK_INIT
            })
            .collect();
        let n = u32::try_from(raw.len()).unwrap_or(u32::MAX);
        // SAFETY: `raw` holds `n` tasks whose argument arrays live in `tasks`.
        check(unsafe { qd_sys::qd_launch_parallel(self.raw(), raw.as_ptr(), n) })
    }
}

/// A launch packed once and queued many times: the kernel, its configuration and a copy of the
/// argument bytes.
///
/// `Send + Sync`: it owns its argument bytes (the raw pointers point into its own heap
/// storage, which never moves) and borrows a `Sync` kernel.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let k = qd::HostKernel::new(&ctx, "k", |_, args| { args.get::<u64>(0)?; Ok(()) })?;
/// let pack = qd::LaunchPack::new(&k, &qd::LaunchConfig::new(), (7u64,));
/// let s = qd::Stream::new(&ctx)?;
/// for _ in 0..3 {
///     // SAFETY: the kernel reads one u64, as packed.
///     unsafe { pack.launch(&s)? };
/// }
/// s.synchronize()?;
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug)]
pub struct LaunchPack<'k> {
    kernel: qd_sys::qd_kernel,
    config: qd_sys::qd_launch_config,
    // The argument bytes, each argument at an 16-byte aligned offset; `args` points into it.
    _bytes: Box<[u128]>,
    args: Box<[qd_arg]>,
    _kernel: PhantomData<&'k Kernel<'k>>,
}

// SAFETY: `args` points only into `_bytes`, which this value owns; the kernel borrow is Sync.
unsafe impl Send for LaunchPack<'_> {}
// SAFETY: nothing mutates the storage after construction.
unsafe impl Sync for LaunchPack<'_> {}

impl<'k> LaunchPack<'k> {
    /// Pack `kernel`, `config` and a copy of `args`.
    pub fn new<A: KernelArgs>(kernel: &'k Kernel<'_>, config: &LaunchConfig, args: A) -> LaunchPack<'k> {
        let mut header = kernel.host.and_then(|h| h.header::<A>());
        let host_packed;
        let packed;
        let list: &[qd_arg] = if let Some(header) = header.as_mut() {
            host_packed = args.pack_host(header);
            host_packed.as_slice()
        } else {
            packed = args.pack();
            packed.as_ref()
        };
        let pieces: Vec<&[u8]> = list
            .iter()
            // SAFETY: each entry points into `args` or `header` for `size` bytes (KernelArg's
            // contract), both alive here.
            .map(|a| if a.size == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(a.data as *const u8, a.size as usize) } })
            .collect();
        let slots: Vec<usize> = pieces.iter().map(|p| p.len().div_ceil(16)).collect();
        let mut bytes = vec![0u128; slots.iter().sum::<usize>().max(1)].into_boxed_slice();
        let base = bytes.as_mut_ptr() as *mut u8;
        let mut args = Vec::with_capacity(pieces.len());
        let mut at = 0usize;
        for (p, s) in pieces.iter().zip(&slots) {
            // SAFETY: `bytes` has room for every piece at its 16-byte slot.
            unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), base.add(at * 16), p.len()) };
            // A zero-sized piece keeps a NULL pointer, which qd refuses as it would unpacked.
            let data = if p.is_empty() { std::ptr::null() } else { unsafe { base.add(at * 16) as *const c_void } };
            args.push(qd_arg { data, size: p.len() as u64 });
            at += s;
        }
        LaunchPack {
            kernel: kernel.raw(),
            config: config.raw(),
            _bytes: bytes,
            args: args.into_boxed_slice(),
            _kernel: PhantomData,
        }
    }

    /// Queue the packed launch on `stream`.
    ///
    /// # Safety
    /// As for [`Stream::launch`].
    #[inline]
    pub unsafe fn launch(&self, stream: &Stream<'_>) -> Result<()> {
        let n = u32::try_from(self.args.len()).unwrap_or(u32::MAX);
        // SAFETY: `args` entries point into `_bytes`, owned by self.
        check(unsafe { qd_sys::qd_launch(stream.raw(), self.kernel, &self.config, self.args.as_ptr(), n) })
    }
}

/// One task of [`Stream::launch_parallel`]: a [`LaunchPack`] and its group.
///
/// `Send + Sync`: as [`LaunchPack`].
#[derive(Debug)]
pub struct Task<'k> {
    group: u32,
    pack: LaunchPack<'k>,
    attrs: [qd_sys::qd_launch_attr; 4],
    num_attrs: u32,
}

impl<'k> Task<'k> {
    /// A task of `group` launching `kernel` with `config` and a copy of `args`.
    pub fn new<A: KernelArgs>(kernel: &'k Kernel<'_>, group: u32, config: &LaunchConfig, args: A) -> Task<'k> {
        let (attrs, num_attrs) = LaunchAttrs::new().raw();
        Task { group, pack: LaunchPack::new(kernel, config, args), attrs, num_attrs }
    }

    /// The task with launch attributes (`qd_task.attrs`; as [`Stream::launch_with`]'s).
    #[must_use]
    pub fn attrs(mut self, attrs: &LaunchAttrs<'k>) -> Task<'k> {
        (self.attrs, self.num_attrs) = attrs.raw();
        self
    }

    /// The task's group.
    pub fn group(&self) -> u32 {
        self.group
    }
}

/// One task of [`Stream::launch_host_parallel`]: a Rust host kernel ([`HostKernel`]), its group,
/// configuration and a copy of its arguments.
///
/// `Send + Sync`: as [`Task`].
#[derive(Debug)]
pub struct HostTask<'k> {
    task: Task<'k>,
}

impl<'k> HostTask<'k> {
    /// A task of `group` launching `kernel` with `config` and a copy of `args`.
    pub fn new<A: KernelArgs>(kernel: &'k HostKernel<'_>, group: u32, config: &LaunchConfig, args: A) -> HostTask<'k> {
        HostTask { task: Task::new(kernel, group, config, args) }
    }

    /// The task with launch attributes (as [`Task::attrs`]).
    #[must_use]
    pub fn attrs(self, attrs: &LaunchAttrs<'k>) -> HostTask<'k> {
        HostTask { task: self.task.attrs(attrs) }
    }

    /// The task's group.
    pub fn group(&self) -> u32 {
        self.task.group
    }
}
