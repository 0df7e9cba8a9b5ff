//! [`Stream`] (owned, borrowed, default) and [`Lease`] (from the pool; `fork` and `join`).

use crate::context::Context;
use crate::error::{check, check_ready, Result};
use crate::event::Event;
use std::fmt;
use std::ops::Deref;

/// The largest stream pool a context can have (`qd_context_desc.stream_pool_size`).
const MAX_POOL_SIZE: u32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Made by qd_stream_create: `Drop` destroys it.
    Owned,
    /// Made by qd_stream_import: `Drop` destroys the handle, never the native stream.
    Borrowed,
    /// A pool lease inside a [`Lease`]: `Drop` releases it.
    Leased,
    /// The default stream or a handle read back (the active stream): `Drop` does nothing.
    Unowned,
}

/// Options of [`Stream::with_options`]. `Send + Sync`: plain data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// Lower is more urgent; 0 is the default; clamped to [`Context::stream_priority_range`].
    pub priority: i32,
    /// `QD_STREAM_NON_BLOCKING` (every qd stream already behaves so; the flag states it).
    pub non_blocking: bool,
}

/// An in-order queue of work. Different streams run concurrently.
///
/// Every call that schedules work is a method of the stream it goes to (or takes the stream
/// as an argument): there is no hidden current stream. A stream borrows its [`Context`], so it
/// cannot outlive it.
///
/// - [`Stream::new`]: owned; `Drop` destroys it (at once, even with work in flight: that work
///   still completes).
/// - [`Context::acquire`] and [`Stream::fork`]: a [`Lease`] from the context's pool, which
///   derefs to a `Stream`; `Drop` gives it back.
/// - [`Stream::import`]: a native stream made outside qd (GPU); `Drop` forgets it and never
///   destroys the native stream.
/// - [`Context::default_stream`]: never destroyed.
///
/// `Send + Sync`: a stream is a 64-bit handle plus a shared borrow of its `Sync` context, and
/// qd allows every stream call from any thread, concurrently.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let stream = qd::Stream::new(&ctx)?;
/// assert!(stream.query()?); // nothing queued: idle
/// stream.synchronize()?;
/// # Ok::<(), qd::Error>(())
/// ```
///
/// A dropped stream cannot be used: the compiler rejects it.
///
/// ```compile_fail,E0382
/// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
/// let stream = qd::Stream::new(&ctx).unwrap();
/// drop(stream);
/// stream.synchronize().unwrap(); // error: use of moved value
/// ```
pub struct Stream<'ctx> {
    raw: qd_sys::qd_stream,
    ctx: &'ctx Context,
    kind: Kind,
}

impl fmt::Debug for Stream<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").field("raw", &format_args!("{:#x}", self.raw)).field("kind", &self.kind).finish()
    }
}

impl<'ctx> Stream<'ctx> {
    /// Create a stream owned by the caller (`qd_stream_create`, default options).
    pub fn new(ctx: &'ctx Context) -> Result<Stream<'ctx>> {
        Self::create(ctx, None)
    }

    /// Create an owned stream with a priority and flags.
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let (_least, greatest) = ctx.stream_priority_range()?;
    /// let urgent = qd::Stream::with_options(&ctx, qd::StreamOptions { priority: -100, ..Default::default() })?;
    /// assert_eq!(urgent.priority()?, greatest); // clamped to the backend's range
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn with_options(ctx: &'ctx Context, options: StreamOptions) -> Result<Stream<'ctx>> {
        let desc = qd_sys::qd_stream_desc {
            flags: if options.non_blocking { qd_sys::QD_STREAM_NON_BLOCKING } else { 0 },
            priority: options.priority,
            ..qd_sys::QD_STREAM_DESC_INIT
        };
        Self::create(ctx, Some(&desc))
    }

    fn create(ctx: &'ctx Context, desc: Option<&qd_sys::qd_stream_desc>) -> Result<Stream<'ctx>> {
        let mut raw = 0;
        let desc = desc.map_or(std::ptr::null(), |d| d as *const _);
        // SAFETY: `desc` is NULL or valid; `raw` is a valid output.
        check(unsafe { qd_sys::qd_stream_create(ctx.raw(), desc, &mut raw) })?;
        Ok(Stream { raw, ctx, kind: Kind::Owned })
    }

    /// Wrap a native stream made outside qd (a `CUstream` or `hipStream_t`) as a borrowed
    /// stream. qd never destroys the native stream; `Drop` only forgets the handle.
    /// Errors: [`crate::Error::NotSupported`] on the CPU backend, which has no native streams.
    ///
    /// # Safety
    /// `native` must be a live native stream of this context's device, and it must stay alive
    /// until the returned `Stream` is dropped.
    pub unsafe fn import(ctx: &'ctx Context, native: u64) -> Result<Stream<'ctx>> {
        let mut raw = 0;
        // SAFETY: `raw` is a valid output; the caller vouches for `native`.
        check(unsafe { qd_sys::qd_stream_import(ctx.raw(), native, &mut raw) })?;
        Ok(Stream { raw, ctx, kind: Kind::Borrowed })
    }

    pub(crate) fn unowned(ctx: &'ctx Context, raw: qd_sys::qd_stream) -> Stream<'ctx> {
        Stream { raw, ctx, kind: Kind::Unowned }
    }

    /// The `qd_stream` handle, for calls through `qd_sys`; valid while `self` lives.
    #[inline(always)]
    pub fn raw(&self) -> qd_sys::qd_stream {
        self.raw
    }

    /// The context this stream belongs to.
    #[inline(always)]
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// Block until all work queued on the stream so far has completed.
    /// Errors: [`crate::Error::InvalidOperation`] from inside a host kernel or callback of this
    /// context; [`crate::Error::DeviceLost`].
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_stream_synchronize(self.raw) })
    }

    /// `true` when all work queued on the stream has completed; never blocks.
    #[inline]
    pub fn query(&self) -> Result<bool> {
        // SAFETY: plain handle call.
        check_ready(unsafe { qd_sys::qd_stream_query(self.raw) })
    }

    /// Make later work on this stream wait until `event`'s most recent record (as of this
    /// call) has completed; the host does not block. Errors: [`crate::Error::WrongContext`]
    /// when the event belongs to another context.
    pub fn wait_event(&self, event: &Event<'_>) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_stream_wait_event(self.raw, event.raw()) })
    }

    /// Record `event` here: it completes when all work queued on this stream so far has.
    pub fn record(&self, event: &Event<'_>) -> Result<()> {
        event.record(self)
    }

    /// The priority applied after clamping to the backend's range.
    pub fn priority(&self) -> Result<i32> {
        let mut p = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_get_priority(self.raw, &mut p) })?;
        Ok(p)
    }

    /// Whether this stream is capturing: the origin of an open capture, or a stream that joined
    /// one (a forked child, a stream that waited on an event recorded in it). Queues nothing,
    /// so it may be asked in the middle of a capture.
    pub fn is_capturing(&self) -> Result<bool> {
        let mut c = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_is_capturing(self.raw, &mut c) })?;
        Ok(c != 0)
    }

    /// The `qd_stream_flags` this stream was created with (`QD_STREAM_NON_BLOCKING` for the
    /// default stream and pool leases; an imported stream's native ones).
    /// Errors: [`crate::Error::NotSupported`] for an imported stream whose driver cannot say.
    pub fn flags(&self) -> Result<u32> {
        let mut f = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_get_flags(self.raw, &mut f) })?;
        Ok(f)
    }

    /// Whether [`Stream::flags`] has `QD_STREAM_NON_BLOCKING`.
    pub fn is_non_blocking(&self) -> Result<bool> {
        Ok(self.flags()? & qd_sys::QD_STREAM_NON_BLOCKING != 0)
    }

    /// The native stream (`CUstream`, `hipStream_t`), owned by qd and valid while `self`
    /// lives. Errors: [`crate::Error::NotSupported`] on the CPU backend.
    pub fn native_handle(&self) -> Result<u64> {
        let mut n = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_native_handle(self.raw, &mut n) })?;
        Ok(n)
    }

    /// Fork: lease `n` streams from the pool, each waiting for the work queued here so far
    /// (pooled events, no host synchronisation). All or nothing.
    /// Errors: [`crate::Error::InvalidArgument`] for `n == 0`,
    /// [`crate::Error::PoolExhausted`] when fewer than `n` streams are free.
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let main = qd::Stream::new(&ctx)?;
    /// let children = main.fork(3)?;
    /// // ... queue work on each child ...
    /// main.join(children)?; // `main` waits for every child; the leases go back to the pool
    /// main.synchronize()?;
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn fork(&self, n: u32) -> Result<Vec<Lease<'ctx>>> {
        if n > MAX_POOL_SIZE {
            // No pool is that large: refused before a handle array of that size is made.
            return Err(crate::Error::with_message(
                qd_sys::QD_ERROR_POOL_EXHAUSTED,
                format!("fork of {n} streams: a stream pool holds at most {MAX_POOL_SIZE}"),
            ));
        }
        let mut raw = vec![0; n as usize];
        // SAFETY: `raw` has room for `n` handles.
        check(unsafe { qd_sys::qd_stream_fork(self.raw, n, raw.as_mut_ptr()) })?;
        Ok(raw.into_iter().map(|r| Lease { stream: Stream { raw: r, ctx: self.ctx, kind: Kind::Leased } }).collect())
    }

    /// Join: make this stream wait for all work queued so far on each lease, then give every
    /// lease back to the pool. The leases are consumed, so none can be used after the join.
    /// On an error nothing is queued, and the leases are released as they drop.
    /// Errors: [`crate::Error::InvalidArgument`] for no leases; [`crate::Error::WrongContext`]
    /// for a lease of another context.
    ///
    /// ```compile_fail,E0505
    /// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
    /// let main = qd::Stream::new(&ctx).unwrap();
    /// let children = main.fork(2).unwrap();
    /// let first = &children[0];
    /// main.join(children).unwrap(); // error: `children` is borrowed by `first`
    /// first.synchronize().unwrap();
    /// ```
    pub fn join<I>(&self, leases: I) -> Result<()>
    where
        I: IntoIterator<Item = Lease<'ctx>>,
    {
        let leases: Vec<Lease<'ctx>> = leases.into_iter().collect();
        let raw: Vec<qd_sys::qd_stream> = leases.iter().map(|l| l.raw()).collect();
        let n = u32::try_from(raw.len()).unwrap_or(u32::MAX);
        // SAFETY: `raw` holds `n` handles.
        check(unsafe { qd_sys::qd_stream_join(self.raw, raw.as_ptr(), n) })?;
        // The join released every lease: their handles are gone, so nothing is left to drop.
        for lease in leases {
            std::mem::forget(lease);
        }
        Ok(())
    }

    /// Make this stream the calling thread's active stream for its context, until the
    /// returned guard drops and restores the previous one.
    ///
    /// The active stream is a per-(thread, context) value that code may read with
    /// [`Context::active_stream`]; no qd call uses it implicitly.
    ///
    /// The guard is `!Send`: it must drop on the thread that made it. Do not hold it across
    /// an `.await`: an async task may resume on another thread, and the value is per thread.
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// {
    ///     let _active = s.set_active()?;
    ///     assert_eq!(ctx.active_stream()?.raw(), s.raw());
    /// }
    /// assert_eq!(ctx.active_stream()?.raw(), ctx.default_stream().raw());
    /// # Ok::<(), qd::Error>(())
    /// ```
    ///
    /// ```compile_fail,E0277
    /// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
    /// let s = qd::Stream::new(&ctx).unwrap();
    /// let guard = s.set_active().unwrap();
    /// std::thread::scope(|scope| {
    ///     scope.spawn(move || drop(guard)); // error: the guard is not `Send`
    /// });
    /// ```
    pub fn set_active(&self) -> Result<crate::active::ActiveGuard<'_>> {
        crate::active::ActiveGuard::set(self)
    }
}

impl Stream<'_> {
    /// Destroy the stream now (owned: `qd_stream_destroy`, work in flight still completes;
    /// imported: forget the handle), or give a lease back (`qd_stream_release`); nothing for
    /// the default stream. `Drop` does the same and keeps a failure for
    /// [`Context::take_drop_errors`]. Errors: [`crate::Error::InvalidOperation`] for a stream
    /// that is capturing or joined an open capture (it stays as it was: join it back and end
    /// the capture).
    pub fn close(self) -> Result<()> {
        let status = self.destroy();
        std::mem::forget(self);
        check(status)
    }

    fn destroy(&self) -> i32 {
        // SAFETY: plain handle calls on a handle this value owns.
        match self.kind {
            Kind::Owned | Kind::Borrowed => unsafe { qd_sys::qd_stream_destroy(self.raw) },
            Kind::Leased => unsafe { qd_sys::qd_stream_release(self.raw) },
            Kind::Unowned => qd_sys::QD_SUCCESS,
        }
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        let status = self.destroy();
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed(if self.kind == Kind::Leased { "Lease" } else { "Stream" }, status);
        }
    }
}

/// A stream leased from the context's pool ([`Context::acquire`], [`Stream::fork`]).
///
/// The lease is exclusive: no other holder gets the same stream until it is given back.
/// `Drop` gives it back (`qd_stream_release`); [`Stream::join`] consumes leases and gives them
/// back after ordering the parent after them. It derefs to [`Stream`], so every stream call
/// takes a lease as well.
///
/// `Send + Sync`: as [`Stream`].
///
/// ```
/// let ctx = qd::Context::builder().stream_pool_size(1).build()?;
/// let lease = ctx.acquire()?;
/// assert!(matches!(ctx.acquire(), Err(qd::Error::PoolExhausted(_))));
/// drop(lease);
/// let _again = ctx.acquire()?;
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug)]
pub struct Lease<'ctx> {
    stream: Stream<'ctx>,
}

impl Lease<'_> {
    /// Give the lease back now (`qd_stream_release`); `Drop` does the same and keeps a failure
    /// for [`Context::take_drop_errors`]. Errors: [`crate::Error::InvalidOperation`] for a
    /// lease of a capture that has not joined back (it stays leased: join it, then end the
    /// capture).
    pub fn close(self) -> Result<()> {
        self.stream.close()
    }
}

impl<'ctx> Deref for Lease<'ctx> {
    type Target = Stream<'ctx>;
    #[inline(always)]
    fn deref(&self) -> &Stream<'ctx> {
        &self.stream
    }
}

impl Context {
    /// Lease a stream from the pool. It never blocks: when every stream is leased it fails at
    /// once with [`crate::Error::PoolExhausted`].
    pub fn acquire(&self) -> Result<Lease<'_>> {
        let mut raw = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_acquire(self.raw(), &mut raw) })?;
        Ok(Lease { stream: Stream { raw, ctx: self, kind: Kind::Leased } })
    }
}
