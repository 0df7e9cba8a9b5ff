//! [`Hazard`] and [`Context::set_hazard_handler`]: the validation mode's reports, delivered to a
//! Rust closure (qd.h, "Validation").

use crate::context::Context;
use crate::error::{check, Result};
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What kind of hazard a [`Hazard`] reports (`qd_hazard_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HazardKind {
    /// A write and another access to overlapping bytes, unordered, on two streams.
    Race,
    /// A free not ordered after an access of the block.
    FreeInUse,
    /// An access to a block after its free was queued.
    UseAfterFree,
    /// A kind this crate does not know (a newer libqd).
    Other(u32),
}

/// One hazard the validation mode found (`qd_hazard`), owned: the handler may keep it.
///
/// `Send + Sync`: plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hazard {
    /// What kind of hazard.
    pub kind: HazardKind,
    /// The stream of the operation being queued (0 for a pooled stream of a parallel launch or
    /// a graph replay, or the host).
    pub stream: qd_sys::qd_stream,
    /// The stream of the earlier operation it conflicts with (as above; possibly stale now).
    pub other_stream: qd_sys::qd_stream,
    /// The block's address.
    pub allocation: u64,
    /// The block's size in bytes.
    pub allocation_bytes: u64,
    /// The first byte of the block both operations touch.
    pub offset: u64,
    /// The operation, e.g. `kernel 'consume' (read)`, `memcpy (write)`, `free`.
    pub operation: String,
    /// The earlier operation.
    pub other_operation: String,
    /// The whole report in one line, as qd's default handler prints it.
    pub message: String,
}

type HandlerFn = dyn Fn(&Hazard) + Send + Sync;

struct Handler {
    f: Box<HandlerFn>,
}

impl Context {
    /// Deliver each hazard the validation mode finds from now on to `f` instead of qd's
    /// default (one line on stderr) (`qd_context_set_hazard_handler`). `f` runs on the thread
    /// whose call found the hazard, before that call returns; it may call qd, except on
    /// streams of this context. A panic in `f` is caught (it never unwinds into C). A handler
    /// replaced by a later call lives until the context is destroyed (a report on another
    /// thread may still reach it). Errors: [`crate::Error::InvalidOperation`] when validation
    /// is off for this context ([`crate::ContextBuilder::validate`]).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let ctx = qd::Context::builder().validate(true).build()?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = seen.clone();
    /// ctx.set_hazard_handler(move |h: &qd::Hazard| sink.lock().unwrap().push(h.clone()))?;
    /// let (a, b) = (qd::Stream::new(&ctx)?, qd::Stream::new(&ctx)?);
    /// let buf = qd::DeviceBuffer::<u32>::alloc(&a, 4)?;
    /// b.memset(&buf, 0)?; // b is not ordered after a's allocation
    /// let seen = seen.lock().unwrap();
    /// assert_eq!(seen.len(), 1);
    /// assert_eq!(seen[0].kind, qd::HazardKind::Race);
    /// assert_eq!(seen[0].allocation, buf.device_ptr().0);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn set_hazard_handler<F>(&self, f: F) -> Result<()>
    where
        F: Fn(&Hazard) + Send + Sync + 'static,
    {
        let handler = Arc::new(Handler { f: Box::new(f) });
        let user_data = Arc::as_ptr(&handler) as *mut c_void;
        // SAFETY: `deliver` has the C signature; `user_data` stays valid while the context
        // lives (kept below).
        check(unsafe { qd_sys::qd_context_set_hazard_handler(self.raw(), Some(deliver), user_data) })?;
        self.keep_alive(handler);
        Ok(())
    }

    /// Restore qd's default hazard handler (one line on stderr per hazard).
    pub fn clear_hazard_handler(&self) -> Result<()> {
        // SAFETY: NULL restores the default.
        check(unsafe { qd_sys::qd_context_set_hazard_handler(self.raw(), None, std::ptr::null_mut()) })
    }
}

fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: qd passes NUL-terminated strings valid during the handler's call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

unsafe extern "C" fn deliver(hazard: *const qd_sys::qd_hazard, user_data: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: qd passes a valid report and the user data given with this handler, a
        // Handler the context keeps alive.
        let (h, handler) = unsafe { (&*hazard, &*(user_data as *const Handler)) };
        let kind = match h.kind {
            qd_sys::QD_HAZARD_RACE => HazardKind::Race,
            qd_sys::QD_HAZARD_FREE_IN_USE => HazardKind::FreeInUse,
            qd_sys::QD_HAZARD_USE_AFTER_FREE => HazardKind::UseAfterFree,
            other => HazardKind::Other(other),
        };
        let report = Hazard {
            kind,
            stream: h.stream,
            other_stream: h.other_stream,
            allocation: h.allocation,
            allocation_bytes: h.allocation_bytes,
            offset: h.offset,
            operation: text(h.operation),
            other_operation: text(h.other_operation),
            message: text(h.message),
        };
        (handler.f)(&report);
    }))
    .map_err(std::mem::forget);
}
