//! The timeline trace (qd.h, "Timeline trace"): [`Context::trace`] returns a [`Trace`] guard
//! that stops the trace and writes the file when dropped; [`Context::start_trace`],
//! [`Context::stop_trace`] and [`Context::flush_trace`] are the calls one to one.

use crate::context::Context;
use crate::error::{check, Error, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A running trace of one context, from [`Context::trace`]. Dropping it stops the trace and
/// writes the file (an error there is lost: call [`Trace::stop`] to see it). It borrows the
/// context, so the context outlives it. `Send + Sync`, as the context is.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("qd-trace-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let stream = qd::Stream::new(&ctx)?;
/// {
///     let _trace = ctx.trace(dir.join("trace.json"))?;
///     let buf = qd::DeviceBuffer::<u32>::alloc(&stream, 16)?;
///     stream.memset(&buf, 0)?;
/// } // the trace stops here and trace.json is written
/// assert!(std::fs::read_to_string(dir.join("trace.json")).unwrap().contains("memset"));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), qd::Error>(())
/// ```
#[must_use = "dropping the guard stops the trace at once"]
#[derive(Debug)]
pub struct Trace<'ctx> {
    ctx: &'ctx Context,
    running: bool,
}

impl Trace<'_> {
    /// Write the trace so far without stopping it (`qd_trace_flush`).
    /// Errors: [`Error::InvalidArgument`] when the file cannot be written.
    pub fn flush(&self) -> Result<()> {
        self.ctx.flush_trace()
    }

    /// Stop the trace and write the file (`qd_trace_stop`), reporting a failure.
    /// Errors: [`Error::InvalidArgument`] when the file cannot be written (the trace is
    /// stopped all the same; [`Context::flush_trace`] writes it again).
    pub fn stop(mut self) -> Result<()> {
        self.running = false;
        self.ctx.stop_trace()
    }
}

impl Drop for Trace<'_> {
    fn drop(&mut self) {
        if self.running {
            // SAFETY: plain handle call; the context outlives the guard.
            let status = unsafe { qd_sys::qd_trace_stop(self.ctx.raw()) };
            if status != qd_sys::QD_SUCCESS {
                self.ctx.drop_failed("Trace", status);
            }
        }
    }
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, "trace path contains a NUL byte"))
}

impl Context {
    /// Start tracing this context into `path` and return the guard that stops it
    /// ([`Trace`]). Every operation of the context's streams from now on is recorded with the
    /// time it ran, for a Chrome trace JSON file that Perfetto opens (`qd trace view` draws it).
    ///
    /// Errors: [`Error::InvalidArgument`] when `path` cannot be written (a missing or read-only
    /// directory, or a directory) or `QD_TRACE_CAPACITY` is malformed;
    /// [`Error::InvalidOperation`] when the context is already traced (`QD_TRACE` set, or
    /// another trace running).
    pub fn trace(&self, path: impl AsRef<Path>) -> Result<Trace<'_>> {
        self.start_trace(path)?;
        Ok(Trace { ctx: self, running: true })
    }

    /// `qd_trace_start`: as [`Context::trace`], without a guard ([`Context::stop_trace`] ends
    /// it; so does dropping the context).
    pub fn start_trace(&self, path: impl AsRef<Path>) -> Result<()> {
        let cpath = c_path(path.as_ref())?;
        // SAFETY: `cpath` is NUL-terminated and outlives the call.
        check(unsafe { qd_sys::qd_trace_start(self.raw(), cpath.as_ptr()) })
    }

    /// `qd_trace_stop`: stop tracing and write the file, after the traced work still running
    /// has completed. Errors: [`Error::InvalidOperation`] when the context is not being
    /// traced; [`Error::InvalidArgument`] when the file cannot be written.
    pub fn stop_trace(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_trace_stop(self.raw()) })
    }

    /// `qd_trace_flush`: write the trace so far without stopping it (after a stop: the
    /// stopped trace again). Errors: [`Error::InvalidOperation`] when the context was never
    /// traced; [`Error::InvalidArgument`] when the file cannot be written.
    pub fn flush_trace(&self) -> Result<()> {
        // SAFETY: plain handle call.
        check(unsafe { qd_sys::qd_trace_flush(self.raw()) })
    }
}
