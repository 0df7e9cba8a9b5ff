//! [`ActiveGuard`]: the thread-local active stream as a scope.
//!
//! Guards may drop in any order. Each thread keeps its live guards in the order they were made;
//! a guard that drops while a later guard of the same context lives hands its "previous" stream
//! to that later guard instead of restoring it, so the active stream is always the one of the
//! newest live guard, and the one before the first guard once all have dropped.

use crate::context::Context;
use crate::error::{check, Result};
use crate::stream::Stream;
use std::cell::RefCell;
use std::marker::PhantomData;

struct Entry {
    id: u64,
    ctx: qd_sys::qd_context,
    previous: qd_sys::qd_stream,
}

thread_local! {
    static GUARDS: RefCell<(u64, Vec<Entry>)> = const { RefCell::new((0, Vec::new())) };
}

/// Restores the calling thread's previous active stream when dropped (from
/// [`Stream::set_active`]). Guards may drop in any order: the active stream is then the one of
/// the newest guard still alive, and the one before the first guard once all have dropped.
///
/// `!Send` and `!Sync`: the active stream is per thread, so the guard must drop on the thread
/// that set it. Do not hold it across an `.await`.
#[derive(Debug)]
#[must_use = "the previous active stream is restored when the guard drops"]
pub struct ActiveGuard<'s> {
    ctx: &'s Context,
    id: u64,
    _not_send: PhantomData<*const ()>,
}

impl<'s> ActiveGuard<'s> {
    pub(crate) fn set(stream: &'s Stream<'_>) -> Result<ActiveGuard<'s>> {
        let ctx = stream.context();
        let mut previous = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_set_active(ctx.raw(), stream.raw(), &mut previous) })?;
        let id = GUARDS.with(|g| {
            let mut g = g.borrow_mut();
            g.0 += 1;
            let id = g.0;
            g.1.push(Entry { id, ctx: ctx.raw(), previous });
            id
        });
        Ok(ActiveGuard { ctx, id, _not_send: PhantomData })
    }

    /// Restore now, as `Drop` does, and report a failure (`Drop` keeps it for
    /// [`Context::take_drop_errors`]). Errors: [`crate::Error::InvalidHandle`] when the stream
    /// to restore has been destroyed meanwhile (the active stream is then left as it was).
    pub fn close(self) -> Result<()> {
        let status = self.restore();
        std::mem::forget(self);
        check(status)
    }

    fn restore(&self) -> i32 {
        let ctx = self.ctx.raw();
        // Some(previous) when this is the newest live guard of its context: restore it.
        // (During the thread's exit the list may be gone; so is the thread's active stream.)
        let to_restore = GUARDS.try_with(|g| {
            let mut g = g.borrow_mut();
            let list = &mut g.1;
            let at = list.iter().position(|e| e.id == self.id)?;
            let entry = list.remove(at);
            match list[at..].iter_mut().find(|e| e.ctx == ctx) {
                Some(later) => {
                    later.previous = entry.previous;
                    None
                }
                None => Some(entry.previous),
            }
        });
        let to_restore = to_restore.ok().flatten();
        match to_restore {
            // SAFETY: plain handle call; NULL `previous` (no stream set before) is allowed.
            Some(previous) => unsafe { qd_sys::qd_stream_set_active(ctx, previous, std::ptr::null_mut()) },
            None => qd_sys::QD_SUCCESS,
        }
    }
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        let status = self.restore();
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("ActiveGuard", status);
        }
    }
}
