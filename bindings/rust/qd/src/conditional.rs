//! [`Conditional`]: a branch or loop open on a capturing stream, as a guard.

use crate::error::Result;
use crate::graph::ConditionalKind;
use crate::stream::Stream;
use std::fmt;

/// A conditional open on a capturing stream, from [`Stream::conditional`] until
/// [`Conditional::end`] (qd.h, "Conditionals"): the work queued on the stream meanwhile (and on
/// the streams that join it there) is the conditional's current body, decided on the device at
/// each replay from the `u32` condition word.
///
/// [`Conditional::next_branch`] closes the current body and opens the next one (an IF_ELSE's
/// else body, a SWITCH's next case). Dropping the guard without [`Conditional::end`] closes the
/// conditional all the same (what the bodies queued stays in the capture); if it cannot close
/// (a stream that joined the body has not joined back) it stays open, and the failure is kept
/// for [`crate::Context::take_drop_errors`].
///
/// The guard borrows its stream, so the stream outlives it; it is `#[must_use]`, since one
/// dropped at once opens an empty body.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let s = qd::Stream::new(&ctx)?;
/// let word = qd::DeviceBuffer::<u32>::alloc(&s, 1)?;
/// let capture = s.begin_capture()?;
/// let mut branch = s.conditional(qd::ConditionalKind::IfElse, word.device_ptr().0, 0)?;
/// // ... the then body's work on `s` ...
/// branch.next_branch()?;
/// // ... the else body's work ...
/// branch.end()?;
/// let graph = capture.end()?;
/// # drop(graph);
/// # Ok::<(), qd::Error>(())
/// ```
///
/// ```compile_fail,E0505
/// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
/// let s = qd::Stream::new(&ctx).unwrap();
/// let word = qd::DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
/// let capture = s.begin_capture().unwrap();
/// let c = s.conditional(qd::ConditionalKind::If, word.device_ptr().0, 0).unwrap();
/// drop(s); // error: `s` is borrowed by the conditional
/// c.end().unwrap();
/// ```
#[must_use = "the conditional closes when the guard drops: keep it while its body is queued"]
pub struct Conditional<'s, 'ctx> {
    stream: &'s Stream<'ctx>,
    open: bool,
}

impl fmt::Debug for Conditional<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conditional")
            .field("stream", &format_args!("{:#x}", self.stream.raw()))
            .field("open", &self.open)
            .finish()
    }
}

impl<'s, 'ctx> Conditional<'s, 'ctx> {
    /// The stream the conditional was opened on.
    pub fn stream(&self) -> &'s Stream<'ctx> {
        self.stream
    }

    /// Close the current body and open the next one (`qd_stream_next_branch`). Errors:
    /// [`crate::Error::InvalidOperation`] for an IF or a WHILE (one body), when the last body
    /// is open already, or when a stream that joined the body has not joined back.
    pub fn next_branch(&mut self) -> Result<()> {
        self.stream.next_branch()
    }

    /// The conditional's native handle (`qd_conditional_handle`), for kernels that set its
    /// value themselves; [`crate::Error::NotSupported`] where the capture is not a CUDA driver
    /// graph.
    pub fn handle(&self) -> Result<u64> {
        self.stream.conditional_handle()
    }

    /// Close the conditional: later work on the stream follows all of it
    /// (`qd_stream_end_conditional`). Errors: [`crate::Error::InvalidOperation`] when a stream
    /// that joined the body has not joined back (the conditional stays open and the guard is
    /// gone: join it and close it with [`Stream::end_conditional`]).
    pub fn end(mut self) -> Result<()> {
        self.open = false;
        self.stream.end_conditional()
    }
}

impl Drop for Conditional<'_, '_> {
    fn drop(&mut self) {
        if self.open {
            // SAFETY: plain handle call.
            let status = unsafe { qd_sys::qd_stream_end_conditional(self.stream.raw()) };
            if status != qd_sys::QD_SUCCESS {
                self.stream.context().drop_failed("Conditional", status);
            }
        }
    }
}

impl<'ctx> Stream<'ctx> {
    /// Open a conditional on this capturing stream and return its guard; see [`Conditional`]
    /// and [`Stream::begin_conditional`] for the arguments and errors.
    pub fn conditional(&self, kind: ConditionalKind, condition: u64, num_cases: u32) -> Result<Conditional<'_, 'ctx>> {
        self.begin_conditional(kind, condition, num_cases)?;
        Ok(Conditional { stream: self, open: true })
    }

    /// Capture `body` as a WHILE loop: at each replay it runs while the word at `condition` is
    /// not 0, deciding before the first iteration and after each one. `body` queues the loop's
    /// work on the stream it is given; the conditional is closed after it returns, also when it
    /// fails (its error is returned).
    pub fn while_loop<F>(&self, condition: u64, body: F) -> Result<()>
    where
        F: FnOnce(&Stream<'ctx>) -> Result<()>,
    {
        let c = self.conditional(ConditionalKind::While, condition, 0)?;
        body(self)?;
        c.end()
    }

    /// Capture `then` as an IF: at each replay it runs when the word at `condition` is not 0;
    /// closed after `then` returns, as [`Stream::while_loop`].
    pub fn if_then<F>(&self, condition: u64, then: F) -> Result<()>
    where
        F: FnOnce(&Stream<'ctx>) -> Result<()>,
    {
        let c = self.conditional(ConditionalKind::If, condition, 0)?;
        then(self)?;
        c.end()
    }

    /// Capture an IF_ELSE: at each replay `then` runs when the word is not 0, `otherwise` when
    /// it is; closed after both returned, as [`Stream::while_loop`].
    pub fn if_else<F, G>(&self, condition: u64, then: F, otherwise: G) -> Result<()>
    where
        F: FnOnce(&Stream<'ctx>) -> Result<()>,
        G: FnOnce(&Stream<'ctx>) -> Result<()>,
    {
        let mut c = self.conditional(ConditionalKind::IfElse, condition, 0)?;
        then(self)?;
        c.next_branch()?;
        otherwise(self)?;
        c.end()
    }
}
