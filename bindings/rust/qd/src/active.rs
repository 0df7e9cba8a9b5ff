//! [`ActiveGuard`]: the thread-local active stream as a scope.

use crate::error::{check, Result};
use crate::stream::Stream;
use std::marker::PhantomData;

/// Restores the calling thread's previous active stream when dropped (from
/// [`Stream::set_active`]).
///
/// `!Send` and `!Sync`: the active stream is per thread, so the guard must drop on the thread
/// that set it. Do not hold it across an `.await`.
#[derive(Debug)]
#[must_use = "the previous active stream is restored when the guard drops"]
pub struct ActiveGuard<'s> {
    ctx: qd_sys::qd_context,
    previous: qd_sys::qd_stream,
    _stream: PhantomData<&'s ()>,
    _not_send: PhantomData<*const ()>,
}

impl<'s> ActiveGuard<'s> {
    pub(crate) fn set(stream: &'s Stream<'_>) -> Result<ActiveGuard<'s>> {
        let ctx = stream.context().raw();
        let mut previous = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_stream_set_active(ctx, stream.raw(), &mut previous) })?;
        Ok(ActiveGuard { ctx, previous, _stream: PhantomData, _not_send: PhantomData })
    }
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        // If the previous stream was destroyed meanwhile, qd refuses it (INVALID_HANDLE) and the
        // active stream stays as set; there is nothing better to restore.
        // SAFETY: plain handle call; NULL `previous` is allowed.
        unsafe { qd_sys::qd_stream_set_active(self.ctx, self.previous, std::ptr::null_mut()) };
    }
}
