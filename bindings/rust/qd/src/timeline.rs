//! [`Timeline`]: a 64-bit counter that only grows, signalled and waited on by streams and the
//! host (qd.h, "Timelines").

use crate::context::Context;
use crate::error::{check, check_ready, Result};
use crate::stream::Stream;
use std::time::Duration;

/// A timeline: streams signal it ([`Stream::signal`]) and wait for a value of it
/// ([`Stream::wait_value`], which may be queued before the signal that satisfies it); the host
/// signals it, waits for it and reads it. Each signal's value must be above every value
/// signalled or queued before it ([`crate::Error::InvalidArgument`] otherwise, nothing queued).
///
/// `Drop` destroys it at once: signals already queued still complete, and a queued wait that no
/// signal will reach is released.
///
/// `Send + Sync`: a 64-bit handle plus a borrow of its `Sync` context; qd allows every
/// timeline call from any thread.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let (a, b) = (qd::Stream::new(&ctx)?, qd::Stream::new(&ctx)?);
/// let tl = qd::Timeline::new(&ctx, 0)?;
/// b.wait_value(&tl, 1)?;  // before the signal: b's later work waits for 1
/// a.signal(&tl, 1)?;      // once a's work so far is done, the counter becomes 1
/// assert!(tl.wait(1, None)?);
/// b.synchronize()?;
/// assert_eq!(tl.value()?, 1);
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug)]
pub struct Timeline<'ctx> {
    raw: qd_sys::qd_timeline,
    ctx: &'ctx Context,
}

impl<'ctx> Timeline<'ctx> {
    /// A timeline of `ctx` whose counter starts at `initial` (`qd_timeline_create`).
    pub fn new(ctx: &'ctx Context, initial: u64) -> Result<Timeline<'ctx>> {
        let mut raw = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_timeline_create(ctx.raw(), initial, &mut raw) })?;
        Ok(Timeline { raw, ctx })
    }

    /// The `qd_timeline` handle; valid while `self` lives.
    pub fn raw(&self) -> qd_sys::qd_timeline {
        self.raw
    }

    /// The context the timeline belongs to.
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// The counter now (`qd_timeline_query`).
    pub fn value(&self) -> Result<u64> {
        let mut v = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_timeline_query(self.raw, &mut v) })?;
        Ok(v)
    }

    /// Signal from the host (`qd_timeline_host_signal`): the counter becomes `value` now.
    pub fn signal(&self, value: u64) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_timeline_host_signal(self.raw, value) })
    }

    /// Block until the counter reaches `value` (`qd_timeline_host_wait`): `true` when it did,
    /// `false` when `timeout` passed first (`None`: no limit; `Some(Duration::ZERO)`: only
    /// look). A destroyed timeline or context, or a lost context, is an error, never a hang.
    pub fn wait(&self, value: u64, timeout: Option<Duration>) -> Result<bool> {
        let ns = match timeout {
            None => u64::MAX,
            Some(t) => u64::try_from(t.as_nanos()).unwrap_or(u64::MAX - 1).min(u64::MAX - 1),
        };
        // SAFETY: plain handle call.
        check_ready(unsafe { qd_sys::qd_timeline_host_wait(self.raw, value, ns) })
    }

    /// Destroy the timeline now (`qd_timeline_destroy`). `Drop` does the same and keeps a
    /// failure for [`Context::take_drop_errors`].
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the handle was ours.
        check(unsafe { qd_sys::qd_timeline_destroy(raw) })
    }
}

impl Drop for Timeline<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is ours.
        let status = unsafe { qd_sys::qd_timeline_destroy(self.raw) };
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("Timeline", status);
        }
    }
}

impl Stream<'_> {
    /// Queue a signal of `timeline` (`qd_timeline_signal`): once the work queued here so far
    /// has completed, its counter becomes `value`.
    pub fn signal(&self, timeline: &Timeline<'_>, value: u64) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_timeline_signal(self.raw(), timeline.raw(), value) })
    }

    /// Make later work here wait until `timeline` reaches `value` (`qd_timeline_wait`); the
    /// host does not block, and the signal may be queued later.
    pub fn wait_value(&self, timeline: &Timeline<'_>, value: u64) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_timeline_wait(self.raw(), timeline.raw(), value) })
    }
}
