//! [`Event`]: completion markers with optional timing.

use crate::context::Context;
use crate::error::{check, check_ready, Error, Result};
use crate::stream::Stream;
use std::time::Duration;

/// A completion marker recorded on a stream; with timing, it also records a timestamp.
///
/// `Drop` destroys it at once, even with a record pending; streams already waiting on it
/// still wait for that record.
///
/// `Send + Sync`: a 64-bit handle plus a borrow of its `Sync` context; qd allows every event
/// call from any thread.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let (a, b) = (qd::Stream::new(&ctx)?, qd::Stream::new(&ctx)?);
/// let done = qd::Event::new(&ctx)?;
/// done.record(&a)?;      // completes when a's work so far has
/// b.wait_event(&done)?;  // b's later work waits for it; the host does not block
/// done.synchronize()?;
/// assert!(done.query()?);
/// # Ok::<(), qd::Error>(())
/// ```
#[derive(Debug)]
pub struct Event<'ctx> {
    raw: qd_sys::qd_event,
    ctx: &'ctx Context,
}

impl<'ctx> Event<'ctx> {
    /// An event without timing.
    pub fn new(ctx: &'ctx Context) -> Result<Event<'ctx>> {
        Self::create(ctx, 0)
    }

    /// An event that records a timestamp, for [`Event::elapsed_ms_since`].
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let (start, end) = (qd::Event::with_timing(&ctx)?, qd::Event::with_timing(&ctx)?);
    /// start.record(&s)?;
    /// end.record(&s)?;
    /// end.synchronize()?;
    /// assert!(end.elapsed_ms_since(&start)? >= 0.0);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn with_timing(ctx: &'ctx Context) -> Result<Event<'ctx>> {
        Self::create(ctx, qd_sys::QD_EVENT_TIMING)
    }

    fn create(ctx: &'ctx Context, flags: u32) -> Result<Event<'ctx>> {
        let mut raw = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_event_create(ctx.raw(), flags, &mut raw) })?;
        Ok(Event { raw, ctx })
    }

    /// The `qd_event` handle; valid while `self` lives.
    pub fn raw(&self) -> qd_sys::qd_event {
        self.raw
    }

    /// The context the event belongs to.
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// Record on `stream`: the event completes when all work queued there so far has.
    /// Recording again replaces the previous record. Errors: [`Error::WrongContext`] for a
    /// stream of another context.
    pub fn record(&self, stream: &Stream<'_>) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_event_record(stream.raw(), self.raw) })
    }

    /// `true` when the most recent record has completed (or there was none); never blocks.
    pub fn query(&self) -> Result<bool> {
        // SAFETY: plain handle call.
        check_ready(unsafe { qd_sys::qd_event_query(self.raw) })
    }

    /// Block until the most recent record has completed.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_event_synchronize(self.raw) })
    }

    /// Milliseconds from `start`'s completion to this event's (negative if this one completed
    /// first). Errors: [`Error::TimingDisabled`], [`Error::NotRecorded`], and
    /// [`Error::NotReady`] while a record has not completed.
    pub fn elapsed_ms_since(&self, start: &Event<'_>) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: valid output.
        let status = unsafe { qd_sys::qd_event_elapsed_ms(start.raw, self.raw, &mut ms) };
        if status == qd_sys::QD_NOT_READY {
            return Err(Error::with_message(status, "a record has not completed yet"));
        }
        check(status)?;
        Ok(ms)
    }
}

impl Event<'_> {
    /// Destroy the event now (`qd_event_destroy`); streams already waiting on it still wait.
    /// `Drop` does the same and keeps a failure for [`Context::take_drop_errors`].
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the handle was ours.
        check(unsafe { qd_sys::qd_event_destroy(raw) })
    }
}

impl Event<'_> {
    /// The time from `start`'s completion to this event's, as a [`Duration`]
    /// ([`Event::elapsed_ms_since`] in milliseconds, with the backend's resolution). Errors: as
    /// [`Event::elapsed_ms_since`], and [`Error::InvalidArgument`] when this event completed
    /// before `start` (a `Duration` is never negative; `elapsed_ms_since` gives the signed
    /// value).
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let (start, end) = (qd::Event::with_timing(&ctx)?, qd::Event::with_timing(&ctx)?);
    /// start.record(&s)?;
    /// end.record(&s)?;
    /// end.synchronize()?;
    /// let took: std::time::Duration = end.elapsed_since(&start)?;
    /// assert!(took < std::time::Duration::from_secs(3600));
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn elapsed_since(&self, start: &Event<'_>) -> Result<Duration> {
        let ms = self.elapsed_ms_since(start)?;
        Duration::try_from_secs_f64(f64::from(ms) / 1000.0).map_err(|_| {
            Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, format!("this event completed {} ms before `start`", -ms))
        })
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle is ours.
        let status = unsafe { qd_sys::qd_event_destroy(self.raw) };
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("Event", status);
        }
    }
}
