//! [`Context`] and its [`ContextBuilder`]; devices, statistics and the library version.

use crate::error::{check, Error, Result};
use crate::stream::Stream;
use std::any::Any;
use std::ffi::CStr;
use std::sync::{Arc, Mutex, OnceLock};

/// A qd backend. `Send + Sync`: a plain value.
///
/// ```
/// assert_eq!(qd::device_count(qd::Backend::Cpu)?, 1);
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// The embedded default: the CPU backend.
    #[default]
    Default,
    /// Asynchronous streams on host threads; always available.
    Cpu,
    /// NVIDIA driver, loaded at run time.
    Cuda,
    /// AMD HIP, loaded at run time.
    Hip,
}

impl Backend {
    /// The `qd_backend` value.
    pub fn raw(self) -> qd_sys::qd_backend {
        match self {
            Backend::Default => qd_sys::QD_BACKEND_DEFAULT,
            Backend::Cpu => qd_sys::QD_BACKEND_CPU,
            Backend::Cuda => qd_sys::QD_BACKEND_CUDA,
            Backend::Hip => qd_sys::QD_BACKEND_HIP,
        }
    }

    /// libqd's name of the backend (`qd_backend_name`): `"default"`, `"cpu"`, `"cuda"`, `"hip"`.
    /// `Display` writes it.
    ///
    /// ```
    /// assert_eq!(qd::Backend::Cuda.name(), "cuda");
    /// assert_eq!(qd::Backend::Cpu.to_string(), "cpu");
    /// ```
    pub fn name(self) -> &'static str {
        // SAFETY: qd_backend_name takes any value and returns a static NUL-terminated string,
        // never NULL.
        let name = unsafe { CStr::from_ptr(qd_sys::qd_backend_name(self.raw())) };
        name.to_str().unwrap_or("unknown")
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Number of devices of a backend (the CPU backend has exactly 1).
///
/// Errors: [`Error::BackendUnavailable`](crate::Error::BackendUnavailable) when the backend was not built in or its driver cannot
/// be loaded; the message carries the loader's reason.
pub fn device_count(backend: Backend) -> Result<u32> {
    let mut n = 0u32;
    // SAFETY: `n` is a valid output location.
    check(unsafe { qd_sys::qd_device_count(backend.raw(), &mut n) })?;
    Ok(n)
}

/// What [`device_info`] reports about one device. `Send + Sync`: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The backend's `qd_backend` value.
    pub backend: u32,
    /// Device ordinal.
    pub device: u32,
    /// CUDA: the driver version (e.g. 13000); CPU: 0.
    pub driver_version: u32,
    /// CUDA compute capability, major; CPU: 0.
    pub compute_major: u32,
    /// CUDA compute capability, minor; CPU: 0.
    pub compute_minor: u32,
    /// GPU: multiprocessors; CPU: hardware threads.
    pub multiprocessors: u32,
    /// Bytes of device memory; CPU: 0 (unknown).
    pub total_memory: u64,
    /// The device's name.
    pub name: String,
    /// (since 0.3) Every count of [`Context::split`] is a multiple of it; 0: the device cannot
    /// be split (HIP, a CUDA driver before 12.4). CPU: 1.
    pub split_granularity: u32,
    /// (since 0.3) The smallest count of [`Context::split`].
    pub split_minimum: u32,
}

/// Describe one device of a backend.
///
/// ```
/// let info = qd::device_info(qd::Backend::Cpu, 0)?;
/// assert!(info.multiprocessors >= 1);
/// # Ok::<(), qd::Error>(())
/// ```
pub fn device_info(backend: Backend, device: u32) -> Result<DeviceInfo> {
    let mut raw = qd_sys::QD_DEVICE_INFO_INIT;
    // SAFETY: `raw` is a valid, initialised output struct with its struct_size.
    check(unsafe { qd_sys::qd_device_get_info(backend.raw(), device, &mut raw) })?;
    // SAFETY: the library NUL-terminates `name` within its 128 bytes; the last byte is forced.
    raw.name[127] = 0;
    let name = unsafe { CStr::from_ptr(raw.name.as_ptr()) }.to_string_lossy().into_owned();
    Ok(DeviceInfo {
        backend: raw.backend,
        device: raw.device,
        driver_version: raw.driver_version,
        compute_major: raw.compute_major,
        compute_minor: raw.compute_minor,
        multiprocessors: raw.multiprocessors,
        total_memory: raw.total_memory,
        name,
        split_granularity: raw.split_granularity,
        split_minimum: raw.split_minimum,
    })
}

/// The loaded library's version, encoded as `(major << 16) | (minor << 8) | patch`; compare
/// with `qd_sys::QD_VERSION` to detect a header and library mismatch.
pub fn version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { qd_sys::qd_version() }
}

/// Options of a [`Context`]; 0 means the library's default for every number.
/// `Send + Sync`: plain data.
///
/// ```
/// let ctx = qd::Context::builder()
///     .backend(qd::Backend::Cpu)
///     .stream_pool_size(4)
///     .event_pool_size(16)
///     .cpu_worker_threads(2)
///     .build()?;
/// assert_eq!(ctx.stats()?.stream_pool_capacity, 4);
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct ContextBuilder {
    backend: Backend,
    device: u32,
    stream_pool_size: u32,
    event_pool_size: u32,
    cpu_worker_threads: u32,
    flags: u32,
}

impl ContextBuilder {
    /// The validation mode (`QD_CONTEXT_VALIDATE`, qd.h "Validation"): unsynchronised
    /// cross-stream accesses, unsafe frees and uses after free are reported (one line on
    /// stderr each) and counted in [`Stats::hazards_reported`]. Default off (or
    /// `QD_VALIDATE=1` in the environment).
    pub fn validate(mut self, on: bool) -> Self {
        self.flags = if on { self.flags | qd_sys::QD_CONTEXT_VALIDATE } else { 0 };
        self
    }
    /// With [`validate`](Self::validate): a call that would be a hazard also fails with
    /// [`Error::Hazard`](crate::Error::Hazard) and queues nothing (`QD_CONTEXT_VALIDATE_FAIL`).
    pub fn validate_fail(mut self, on: bool) -> Self {
        self.flags = if on {
            qd_sys::QD_CONTEXT_VALIDATE | qd_sys::QD_CONTEXT_VALIDATE_FAIL
        } else {
            self.flags & !qd_sys::QD_CONTEXT_VALIDATE_FAIL
        };
        self
    }
    /// The backend (default: [`Backend::Default`], the CPU backend).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// The device ordinal (default 0; must be 0 on the CPU backend).
    pub fn device(mut self, device: u32) -> Self {
        self.device = device;
        self
    }
    /// Most streams leased at once (0 = 32; at most 4096).
    pub fn stream_pool_size(mut self, n: u32) -> Self {
        self.stream_pool_size = n;
        self
    }
    /// Fork/join events kept for reuse (0 = 256).
    pub fn event_pool_size(mut self, n: u32) -> Self {
        self.event_pool_size = n;
        self
    }
    /// CPU backend worker threads (0 = max(2, usable CPUs); at most 256).
    pub fn cpu_worker_threads(mut self, n: u32) -> Self {
        self.cpu_worker_threads = n;
        self
    }
    /// Create the context (`qd_context_create`). Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a
    /// number above its limit or a device out of range, [`Error::BackendUnavailable`](crate::Error::BackendUnavailable),
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory).
    pub fn build(self) -> Result<Context> {
        let desc = qd_sys::qd_context_desc {
            backend: self.backend.raw(),
            device: self.device,
            stream_pool_size: self.stream_pool_size,
            event_pool_size: self.event_pool_size,
            cpu_worker_threads: self.cpu_worker_threads,
            flags: self.flags,
            ..qd_sys::QD_CONTEXT_DESC_INIT
        };
        let mut raw = 0;
        // SAFETY: `desc` and `raw` are valid for the call.
        check(unsafe { qd_sys::qd_context_create(&desc, &mut raw) })?;
        let is_cpu = matches!(self.backend, Backend::Default | Backend::Cpu);
        Context::adopt(raw, is_cpu)
    }
}

impl Context {
    /// Own the context `raw`, just made by `qd_context_create` or `qd_context_split`; on an
    /// error it is destroyed.
    fn adopt(raw: qd_sys::qd_context, is_cpu: bool) -> Result<Context> {
        let mut default_stream = 0;
        // SAFETY: `raw` is the context just created; `default_stream` is a valid output.
        let status = unsafe { qd_sys::qd_context_default_stream(raw, &mut default_stream) };
        if let Err(e) = check(status) {
            // SAFETY: destroys the context just created; nothing else knows it.
            unsafe { qd_sys::qd_context_destroy(raw) };
            return Err(e);
        }
        Ok(Context {
            raw,
            default_stream,
            is_cpu,
            keep_alive: Mutex::new(Vec::new()),
            callback_guard: OnceLock::new(),
            drop_errors: Mutex::new(Vec::new()),
            captures: Mutex::new(Captures::default()),
        })
    }
}

/// A qd context: one (backend, device) with its default stream, stream pool and event pool.
///
/// Every object made from a context ([`Stream`], [`crate::Lease`], [`crate::Event`],
/// [`crate::Module`], [`crate::Kernel`], [`crate::DeviceBuffer`], [`crate::HostBuffer`])
/// borrows it, so none can outlive it: a stale handle cannot be written.
/// `Drop` destroys it (`qd_context_destroy`): it waits for all queued work, then frees
/// everything the context still owns.
///
/// `Send + Sync`: a context is a 64-bit handle and every qd function may be called from any
/// thread, concurrently.
///
/// ```compile_fail,E0597
/// let stream;
/// {
///     let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
///     stream = qd::Stream::new(&ctx).unwrap();
/// } // error: `ctx` does not live long enough
/// stream.synchronize().unwrap();
/// ```
#[derive(Debug)]
pub struct Context {
    raw: qd_sys::qd_context,
    default_stream: qd_sys::qd_stream,
    is_cpu: bool,
    /// Rust closures of host kernels: work queued with them may outlive the kernel handle, so
    /// they live until the context is destroyed (which drains that work first).
    keep_alive: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
    /// The CPU kernel that faults the context after a host callback panicked (made on first use).
    pub(crate) callback_guard: OnceLock<qd_sys::qd_kernel>,
    /// Failures of `Drop`s of this context's objects, until read ([`Context::take_drop_errors`]).
    drop_errors: Mutex<Vec<Error>>,
    /// Captures begun through this crate and still open, and the buffers dropped meanwhile.
    pub(crate) captures: Mutex<Captures>,
}

/// Captures open on a context, and the frees that wait for them to end (a `Drop` never
/// touches a capture: memory.rs).
#[derive(Debug, Default)]
pub(crate) struct Captures {
    pub(crate) open: usize,
    pub(crate) deferred: Vec<crate::memory::DeferredFree>,
}

impl Context {
    /// A context of `backend` with default options (device 0).
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// ctx.synchronize()?;
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn new(backend: Backend) -> Result<Context> {
        ContextBuilder::default().backend(backend).build()
    }

    /// A builder for the context's options.
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// Contexts over disjoint sets of this context's execution units, `counts[i]` for part `i`
    /// (`qd_context_split`, qd.h "SM partitions"): CUDA SMs (green contexts; each count at
    /// least [`DeviceInfo::split_minimum`] and a multiple of
    /// [`DeviceInfo::split_granularity`]), CPU worker threads (this context's worker count
    /// plays the SM count). All or none. Each part is a full context that owns its handle and
    /// borrows nothing of `self`, so either may be dropped first. Errors:
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) (no counts, a count of 0, more
    /// units than the context has, a count the split rule refuses: the message names it),
    /// [`Error::InvalidOperation`](crate::Error::InvalidOperation) (`self` is a part),
    /// [`Error::NotSupported`](crate::Error::NotSupported) (HIP, CUDA before 12.4).
    ///
    /// ```
    /// let ctx = qd::Context::builder().cpu_worker_threads(4).build()?;
    /// let parts = ctx.split(&[2, 2])?;
    /// assert_eq!(parts.len(), 2);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn split(&self, counts: &[u32]) -> Result<Vec<Context>> {
        let n = u32::try_from(counts.len()).map_err(|_| {
            Error::with_message(
                qd_sys::QD_ERROR_INVALID_ARGUMENT,
                format!("{} parts; a split makes 1 to {}", counts.len(), qd_sys::QD_MAX_SPLIT_PARTS),
            )
        })?;
        let mut raws: Vec<qd_sys::qd_context> = vec![0; counts.len().max(1)];
        let one = [0u32];
        let counts_ptr = if counts.is_empty() { one.as_ptr() } else { counts.as_ptr() };
        // SAFETY: `counts_ptr` holds `n` values (or one, unread, when n is 0) and `raws` has
        // room for `n` handles.
        check(unsafe { qd_sys::qd_context_split(self.raw, counts_ptr, n, raws.as_mut_ptr()) })?;
        raws.truncate(counts.len());
        let mut parts = Vec::with_capacity(raws.len());
        let mut left = raws.into_iter();
        while let Some(raw) = left.next() {
            match Context::adopt(raw, self.is_cpu) {
                Ok(part) => parts.push(part),
                Err(e) => {
                    // All or none: the parts not adopted yet go too (the adopted ones drop).
                    for rest in left {
                        // SAFETY: a context just made by the split that nothing else knows.
                        unsafe { qd_sys::qd_context_destroy(rest) };
                    }
                    return Err(e);
                }
            }
        }
        Ok(parts)
    }

    /// The `qd_context` handle, for calls through `qd_sys`. It is valid while `self` lives.
    pub fn raw(&self) -> qd_sys::qd_context {
        self.raw
    }

    /// Whether this is a CPU-backend context (host kernels, no native streams).
    pub fn is_cpu(&self) -> bool {
        self.is_cpu
    }

    /// The context's default stream: an ordinary stream that lives as long as the context and
    /// is never destroyed. On the CPU backend it does not synchronise with other streams.
    pub fn default_stream(&self) -> Stream<'_> {
        Stream::unowned(self, self.default_stream)
    }

    /// Block until all work queued on every stream of the context has completed.
    /// Errors: [`Error::InvalidOperation`](crate::Error::InvalidOperation) from inside a host kernel or callback of this
    /// context, [`Error::DeviceLost`](crate::Error::DeviceLost).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_context_synchronize(self.raw) })
    }

    /// Whether work of this context can be given access to `peer`'s memory
    /// (`qd_context_can_access_peer`): always for two contexts of one device and for CPU
    /// contexts; between two GPUs when the driver reports peer access.
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for the context itself,
    /// [`Error::WrongContext`](crate::Error::WrongContext) for a context of another backend.
    pub fn can_access_peer(&self, peer: &Context) -> Result<bool> {
        let mut can = 0u32;
        // SAFETY: plain handle call with a valid output.
        check(unsafe { qd_sys::qd_context_can_access_peer(self.raw, peer.raw, &mut can) })?;
        Ok(can != 0)
    }

    /// Let work of this context access `peer`'s memory, device memory included
    /// (`qd_context_enable_peer_access`; CUDA: peer access and the peer pool's access). One
    /// direction; again is a no-op. Errors: [`Error::NotSupported`](crate::Error::NotSupported)
    /// when the devices cannot access each other.
    pub fn enable_peer_access(&self, peer: &Context) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_context_enable_peer_access(self.raw, peer.raw) })
    }

    /// The context's statistics (live objects, pool use, bytes allocated); readable on a lost
    /// context too.
    pub fn stats(&self) -> Result<Stats> {
        let mut s = qd_sys::QD_CONTEXT_STATS_INIT;
        // SAFETY: `s` is a valid output struct with its struct_size.
        check(unsafe { qd_sys::qd_context_get_stats(self.raw, &mut s) })?;
        Ok(Stats {
            live_streams: s.live_streams,
            live_events: s.live_events,
            live_modules: s.live_modules,
            live_kernels: s.live_kernels,
            stream_pool_capacity: s.stream_pool_capacity,
            stream_pool_created: s.stream_pool_created,
            stream_pool_leased: s.stream_pool_leased,
            stream_pool_hits: s.stream_pool_hits,
            stream_pool_misses: s.stream_pool_misses,
            event_pool_created: s.event_pool_created,
            event_pool_hits: s.event_pool_hits,
            event_pool_misses: s.event_pool_misses,
            live_allocations: s.live_allocations,
            bytes_allocated: s.bytes_allocated,
            host_bytes_allocated: s.host_bytes_allocated,
            live_graphs: s.live_graphs,
            hazards_reported: s.hazards_reported,
            live_timelines: s.live_timelines,
        })
    }

    /// The backend's stream priority range: (least, greatest). Lower is more urgent; CPU: (0, -2).
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: valid outputs.
        check(unsafe { qd_sys::qd_stream_priority_range(self.raw, &mut least, &mut greatest) })?;
        Ok((least, greatest))
    }

    /// This thread's active stream for this context as a raw handle: the last one set on this
    /// thread with [`Stream::set_active`], or the default stream. It is a value to read; no qd
    /// call uses it behind the caller's back.
    pub fn active_stream_raw(&self) -> Result<qd_sys::qd_stream> {
        let mut s = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_get_active(self.raw, &mut s) })?;
        Ok(s)
    }

    /// This thread's active stream for this context, as a stream that is not destroyed when
    /// dropped. If that stream has been destroyed since it was set, calls with it return
    /// [`Error::InvalidHandle`](crate::Error::InvalidHandle); nothing falls back to another stream.
    pub fn active_stream(&self) -> Result<Stream<'_>> {
        Ok(Stream::unowned(self, self.active_stream_raw()?))
    }

    pub(crate) fn keep_alive(&self, value: Arc<dyn Any + Send + Sync>) {
        // A poisoned lock only means another thread panicked while pushing; the Vec is intact.
        let mut v = self.keep_alive.lock().unwrap_or_else(|p| p.into_inner());
        v.push(value);
    }
}

impl Context {
    /// Destroy the context now (`qd_context_destroy`): wait for all queued work, then free
    /// everything it still owns; `Drop` does the same and cannot report. Errors:
    /// [`Error::InvalidOperation`](crate::Error::InvalidOperation) when the failures of earlier
    /// drops were never read ([`Context::take_drop_errors`]): the message lists them (the
    /// context is destroyed all the same).
    ///
    /// Called inside a host kernel or callback of this context (the last `Arc<Context>` held by
    /// a closure), where qd refuses to destroy it, the destroy runs on a helper thread once the
    /// callback has returned, as for `Drop`.
    pub fn close(self) -> Result<()> {
        let unread = self.take_drop_errors();
        drop(self);
        if unread.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = unread.iter().map(|e| e.to_string()).collect();
        Err(Error::with_message(
            qd_sys::QD_ERROR_INVALID_OPERATION,
            format!("{} drop failure(s) never read: {}", list.len(), list.join("; ")),
        ))
    }

    /// The failures of `Drop`s of this context's objects since the last call, oldest first, and
    /// forgets them. A `Drop` cannot return an error, so each failure is kept here (the error,
    /// with qd's message after the name of what was dropped), and those never read are written
    /// on stderr when the context is destroyed: none is lost silently. The fallible `close()`
    /// (or `free`, `end`, `stop`) of each type returns its error instead.
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let capture = s.begin_capture()?;
    /// let child = s.fork(1)?.pop().unwrap();
    /// drop(child); // qd refuses to release a stream of an open capture
    /// let errors = ctx.take_drop_errors();
    /// assert!(matches!(errors[..], [qd::Error::InvalidOperation(_)]), "{errors:?}");
    /// # drop(capture);
    /// # ctx.take_drop_errors();
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn take_drop_errors(&self) -> Vec<Error> {
        std::mem::take(&mut *self.drop_errors.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Keep the failure of a `Drop` of `what` (status just returned on this thread).
    #[cold]
    pub(crate) fn drop_failed(&self, what: &str, status: i32) {
        let e = Error::from_last(status);
        self.drop_error(Error::with_message(e.status(), format!("dropping {what}: {}", e.message())));
    }

    #[cold]
    pub(crate) fn drop_error(&self, e: Error) {
        self.drop_errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let unread = self.take_drop_errors();
        for e in &unread {
            eprintln!("qd: a drop failed and its error was never read (Context::take_drop_errors): {e}");
        }
        let keep_alive = std::mem::take(self.keep_alive.get_mut().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: the handle is ours; every child borrows `self`, so none is left.
        let status = unsafe { qd_sys::qd_context_destroy(self.raw) };
        if status == qd_sys::QD_SUCCESS {
            return;
        }
        // Only refused inside a host kernel or callback of this context (the last owner of the
        // context, e.g. an `Arc`, was a closure). Its queued work may still use the closures, so
        // destroy it from a helper thread, which waits for that callback to return, and release
        // the closures after.
        let raw = self.raw;
        // Never dropped unless the destroy succeeded (not even if the thread cannot start).
        let keep_alive = std::mem::ManuallyDrop::new(keep_alive);
        let destroy = move || {
            // SAFETY: nothing else holds the handle any more.
            let status = unsafe { qd_sys::qd_context_destroy(raw) };
            if status == qd_sys::QD_SUCCESS {
                drop(std::mem::ManuallyDrop::into_inner(keep_alive));
            } else {
                eprintln!("qd: destroying a context from a helper thread failed: {}", Error::from_last(status));
            }
        };
        if let Err(e) = std::thread::Builder::new().name("qd-context-destroy".into()).spawn(destroy) {
            eprintln!("qd: a context dropped inside its own callback cannot be destroyed (no helper thread: {e}); it is leaked");
        }
    }
}

/// Statistics of one context ([`Context::stats`]); fields as in `qd_context_stats`.
/// `Send + Sync`: plain numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Streams with a valid handle: created, imported, leased and the default stream.
    pub live_streams: u64,
    /// Events created by the user and not destroyed.
    pub live_events: u64,
    /// Modules loaded and not unloaded.
    pub live_modules: u64,
    /// Kernel handles not destroyed.
    pub live_kernels: u64,
    /// Most streams leased at once.
    pub stream_pool_capacity: u64,
    /// Native streams the pool has created so far.
    pub stream_pool_created: u64,
    /// Leases held now (acquire, fork, parallel launch).
    pub stream_pool_leased: u64,
    /// Leases served by a stream the pool already had.
    pub stream_pool_hits: u64,
    /// Leases that had to create a stream.
    pub stream_pool_misses: u64,
    /// Native events the fork/join event pool has created.
    pub event_pool_created: u64,
    /// Fork/join events served from the pool.
    pub event_pool_hits: u64,
    /// Fork/join events that had to be created.
    pub event_pool_misses: u64,
    /// Stream-ordered allocations not yet freed.
    pub live_allocations: u64,
    /// Their total size in bytes.
    pub bytes_allocated: u64,
    /// Pinned host bytes not yet freed.
    pub host_bytes_allocated: u64,
    /// Graphs ([`crate::Graph`]) not yet destroyed (since 0.2).
    pub live_graphs: u64,
    /// Hazards the validation mode reported (0 when it is off).
    pub hazards_reported: u64,
    /// Timelines ([`crate::Timeline`]) not yet destroyed (since 0.3).
    pub live_timelines: u64,
}
