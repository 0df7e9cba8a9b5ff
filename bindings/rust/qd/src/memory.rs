//! [`DeviceBuffer`]: device memory allocated and freed in stream order, with `memset` and
//! device-to-device copies.

use crate::args::{DevicePtr, KernelArg, Pod};
use crate::context::Context;
use crate::error::{check, Error, Result};
use crate::stream::Stream;
use qd_sys::qd_arg;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::Mutex;

/// `len` elements of `T` in device memory (host memory on the CPU backend), allocated in the
/// order of a stream (`qd_mem_alloc_async`).
///
/// Freeing names its stream: [`DeviceBuffer::free`] frees after the work queued on that stream.
/// The buffer remembers every stream that this crate's copies and memsets queued work on, and
/// orders those before the free with events, so a free never overtakes a copy. `Drop` frees
/// on the context's default stream the same way; while a capture begun with
/// [`Stream::begin_capture`] is open on the context, it frees once the last one has ended
/// instead (a drop never touches another's capture). A buffer allocated on a capturing stream
/// is the graph's own block (qd.h, "Memory inside a graph"): its drop frees it inside that
/// capture, on the stream it was allocated on, so drop it before the capture ends (a block the
/// capture does not free makes [`Capture::end`](crate::Capture::end) fail). A failed drop is
/// kept for
/// [`Context::take_drop_errors`]. Kernels are the caller's side of the bargain:
/// a kernel that uses the buffer on another stream must be ordered before the free (the
/// `# Safety` of [`Stream::launch`]).
///
/// The contents start undefined until written (a memset or a copy).
///
/// `Send + Sync`: an address, a borrow of a `Sync` context, and a `Mutex`-guarded list of
/// streams; qd allows memory calls from any thread.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let s = qd::Stream::new(&ctx)?;
/// let buf = qd::DeviceBuffer::<u32>::alloc(&s, 4)?;
/// s.memset(&buf, 0)?;
/// s.copy_from_slice(&buf, &[1, 2, 3, 4])?;   // waits: the slice is only borrowed
/// let mut back = [0u32; 4];
/// s.copy_to_slice(&mut back, &buf)?;         // waits
/// assert_eq!(back, [1, 2, 3, 4]);
/// buf.free(&s)?;
/// # Ok::<(), qd::Error>(())
/// ```
///
/// A buffer cannot outlive its context:
///
/// ```compile_fail,E0597
/// let buf;
/// {
///     let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
///     buf = qd::DeviceBuffer::<u8>::alloc(&ctx.default_stream(), 16).unwrap();
/// } // error: `ctx` does not live long enough
/// drop(buf);
/// ```
pub struct DeviceBuffer<'ctx, T: Pod> {
    addr: u64,
    len: usize,
    ctx: &'ctx Context,
    /// Streams that queued work on this buffer through this crate (allocation included).
    used_on: Mutex<Vec<qd_sys::qd_stream>>,
    /// The stream it was allocated on when that stream was capturing: the block is the graph's
    /// (qd.h, "Memory inside a graph") and is freed inside the capture, on this stream.
    in_capture: Option<qd_sys::qd_stream>,
    _t: PhantomData<T>,
}

impl<T: Pod> fmt::Debug for DeviceBuffer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer").field("addr", &format_args!("{:#x}", self.addr)).field("len", &self.len).finish()
    }
}

pub(crate) fn byte_len<T>(len: usize) -> Result<u64> {
    len.checked_mul(size_of::<T>())
        .map(|b| b as u64)
        .ok_or_else(|| Error::with_message(qd_sys::QD_ERROR_OVERFLOW, format!("{len} elements of {} bytes overflow", size_of::<T>())))
}

impl<'ctx, T: Pod> DeviceBuffer<'ctx, T> {
    /// Allocate `len` elements in the order of `stream`: work queued on `stream` after this
    /// may use the buffer (other streams must be ordered after it with an event).
    /// Errors: [`Error::InvalidArgument`] for `len == 0`, [`Error::Overflow`] for a size that
    /// cannot be addressed, [`Error::OutOfMemory`].
    pub fn alloc(stream: &Stream<'ctx>, len: usize) -> Result<DeviceBuffer<'ctx, T>> {
        let bytes = byte_len::<T>(len)?;
        let mut addr = 0;
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_mem_alloc_async(stream.raw(), bytes, &mut addr) })?;
        // Asked only while a capture of this crate is open: no extra call on the common path.
        let in_capture = (stream.context().captures_open() && stream.is_capturing().unwrap_or(false)).then(|| stream.raw());
        Ok(DeviceBuffer { addr, len, ctx: stream.context(), used_on: Mutex::new(vec![stream.raw()]), in_capture, _t: PhantomData })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no element (never: qd refuses empty allocations).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn byte_len(&self) -> u64 {
        (self.len * size_of::<T>()) as u64
    }

    /// The device address, for kernels (a [`DevicePtr`] does not keep the buffer alive).
    pub fn device_ptr(&self) -> DevicePtr {
        DevicePtr(self.addr)
    }

    /// The context the buffer belongs to.
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    pub(crate) fn note_use(&self, stream: &Stream<'_>) {
        let mut used = self.used_on.lock().unwrap_or_else(|p| p.into_inner());
        if !used.contains(&stream.raw()) {
            used.push(stream.raw());
        }
    }

    /// Free in the order of `stream`: after the work queued on it so far, and (through events)
    /// after the work this crate queued on the buffer on other streams. Errors:
    /// [`Error::DeviceLost`] (the context frees the block when it is destroyed);
    /// [`Error::InvalidAddress`] for a stream of another context,
    /// [`Error::InvalidHandle`] for a destroyed stream, [`Error::InvalidOperation`] for a
    /// capturing stream: for these the buffer is then freed as `Drop` frees it, so no error
    /// leaks the block.
    pub fn free(mut self, stream: &Stream<'_>) -> Result<()> {
        let used = self.take_uses();
        let result = free_after_uses(self.ctx, self.addr, &used, stream.raw());
        if let Err(e) = &result {
            if !matches!(e, Error::DeviceLost(_)) {
                // The stream named cannot free it: free it as Drop does.
                *self.used_on.get_mut().unwrap_or_else(|p| p.into_inner()) = used;
                self.release();
            }
        }
        // Given up either way: on DEVICE_LOST the context frees the block when destroyed.
        std::mem::forget(self);
        result
    }

    fn take_uses(&self) -> Vec<qd_sys::qd_stream> {
        std::mem::take(&mut *self.used_on.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// What `Drop` does: free on the context's default stream after every use, or, while a
    /// capture of the context is open, once the last one has ended (a free ordered after a
    /// capturing stream would make the default stream join the capture). A failure is kept
    /// for [`Context::take_drop_errors`].
    fn release(&mut self) {
        let used = self.take_uses();
        if let Some(stream) = self.in_capture {
            // The graph's block: freed inside the capture, on the stream it was allocated on,
            // after the capture's work on it (the capture orders its streams itself). Once the
            // capture has ended the graph owns the block (freed inside it, or the end was
            // refused and the capture is still open): nothing is left for the buffer to free.
            // SAFETY: plain handle/address call.
            let status = unsafe { qd_sys::qd_mem_free_async(stream, self.addr) };
            if status != qd_sys::QD_SUCCESS && status != qd_sys::QD_ERROR_INVALID_ADDRESS {
                self.ctx.drop_failed("DeviceBuffer (a block of a capture)", status);
            }
            return;
        }
        {
            let mut captures = self.ctx.captures.lock().unwrap_or_else(|p| p.into_inner());
            if captures.open > 0 {
                captures.deferred.push(DeferredFree { addr: self.addr, used_on: used });
                return;
            }
        }
        DeferredFree { addr: self.addr, used_on: used }.run(self.ctx);
    }
}

/// A buffer dropped while a capture was open: freed when the last capture ends.
#[derive(Debug)]
pub(crate) struct DeferredFree {
    addr: u64,
    used_on: Vec<qd_sys::qd_stream>,
}

impl DeferredFree {
    pub(crate) fn run(self, ctx: &Context) {
        if let Err(e) = free_after_uses(ctx, self.addr, &self.used_on, ctx.default_stream().raw()) {
            // On DEVICE_LOST, or inside a host callback of this context (no waiting there), the
            // block stays with the context, which frees it on destruction.
            ctx.drop_error(Error::with_message(e.status(), format!("dropping DeviceBuffer {:#x}: {}", self.addr, e.message())));
        }
    }
}

/// Free `addr` on `stream`, after the work queued on every stream of `used`.
fn free_after_uses(ctx: &Context, addr: u64, used: &[qd_sys::qd_stream], stream: qd_sys::qd_stream) -> Result<()> {
    let mut ordered = true;
    for &other in used.iter().filter(|&&s| s != stream) {
        ordered &= order_after(ctx, stream, other);
    }
    if !ordered {
        // A stream that used the buffer is gone (destroyed or released): its work still runs
        // and cannot be named any more, so wait for the whole context.
        ctx.synchronize()?;
    }
    // SAFETY: plain handle/address call.
    check(unsafe { qd_sys::qd_mem_free_async(stream, addr) })
}

impl Context {
    /// Whether a capture begun through this crate is open on this context.
    pub(crate) fn captures_open(&self) -> bool {
        self.captures.lock().unwrap_or_else(|p| p.into_inner()).open > 0
    }

    /// Frees deferred while captures were open, when the last one has ended.
    pub(crate) fn capture_ended(&self) {
        let deferred = {
            let mut captures = self.captures.lock().unwrap_or_else(|p| p.into_inner());
            captures.open = captures.open.saturating_sub(1);
            if captures.open > 0 {
                return;
            }
            std::mem::take(&mut captures.deferred)
        };
        for d in deferred {
            d.run(self);
        }
    }
}

/// Make `waiter` wait for the work queued so far on `other`; false if that cannot be done.
/// `other` may be a stream of another context of the backend (a peer copy): the event is one of
/// `other`'s context, and the wait crosses contexts.
pub(crate) fn order_after(ctx: &Context, waiter: qd_sys::qd_stream, other: qd_sys::qd_stream) -> bool {
    let mut event = 0;
    let mut owner = ctx.raw();
    // SAFETY: plain handle calls with valid outputs.
    unsafe {
        if qd_sys::qd_stream_get_context(other, &mut owner) != qd_sys::QD_SUCCESS {
            return false;
        }
        if qd_sys::qd_event_create(owner, 0, &mut event) != qd_sys::QD_SUCCESS {
            return false;
        }
        let ok = qd_sys::qd_event_record(other, event) == qd_sys::QD_SUCCESS
            && qd_sys::qd_stream_wait_event(waiter, event) == qd_sys::QD_SUCCESS;
        qd_sys::qd_event_destroy(event);
        ok
    }
}

impl<T: Pod> Drop for DeviceBuffer<'_, T> {
    fn drop(&mut self) {
        self.release();
    }
}

/// A buffer's address as a kernel argument (the buffer must outlive the kernel's run: see
/// [`Stream::launch`]).
// SAFETY: `data` points to the 8 bytes of the address inside the buffer value.
unsafe impl<T: Pod> KernelArg for &DeviceBuffer<'_, T> {
    #[inline(always)]
    fn as_qd_arg(&self) -> qd_arg {
        qd_arg { data: &self.addr as *const u64 as *const c_void, size: 8 }
    }
}

fn range_error(what: &str) -> Error {
    Error::with_message(qd_sys::QD_ERROR_INVALID_ADDRESS, what.to_string())
}

impl Stream<'_> {
    /// Set every byte of `dst` to `value`, in stream order.
    pub fn memset<T: Pod>(&self, dst: &DeviceBuffer<'_, T>, value: u8) -> Result<()> {
        self.memset_bytes(dst, 0, dst.byte_len(), value)
    }

    /// Set `bytes` bytes of `dst` from byte `offset` to `value`, in stream order.
    /// Errors: [`Error::InvalidAddress`] for a range outside the buffer.
    pub fn memset_bytes<T: Pod>(&self, dst: &DeviceBuffer<'_, T>, offset: u64, bytes: u64, value: u8) -> Result<()> {
        if !matches!(offset.checked_add(bytes), Some(end) if end <= dst.byte_len()) {
            return Err(range_error("memset range runs past the end of the buffer"));
        }
        dst.note_use(self);
        // SAFETY: the range lies inside a live allocation of dst.
        check(unsafe { qd_sys::qd_memset_async(self.raw(), dst.addr + offset, value, bytes) })
    }

    /// Copy all of `src` to `dst` (same length), device to device, in stream order.
    /// Errors: [`Error::InvalidArgument`] when the lengths differ.
    pub fn copy_device<T: Pod>(&self, dst: &DeviceBuffer<'_, T>, src: &DeviceBuffer<'_, T>) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::with_message(
                qd_sys::QD_ERROR_INVALID_ARGUMENT,
                format!("copy of {} elements into a buffer of {}", src.len(), dst.len()),
            ));
        }
        dst.note_use(self);
        src.note_use(self);
        // SAFETY: both ranges are whole live allocations.
        check(unsafe { qd_sys::qd_memcpy_async(self.raw(), dst.addr, src.addr, dst.byte_len()) })
    }

    /// Copy all of `src` to `dst` (same length), buffers of two contexts of one backend (two
    /// GPUs, or two CPU contexts), in stream order on this stream, a stream of either buffer's
    /// context (`qd_memcpy_peer_async`). Order the other context's work with events
    /// ([`Stream::wait_event`] accepts an event of another context). Errors:
    /// [`Error::InvalidArgument`] when the lengths differ; [`Error::WrongContext`] when this
    /// stream belongs to neither context or the contexts are of different backends.
    pub fn copy_peer<T: Pod>(&self, dst: &DeviceBuffer<'_, T>, src: &DeviceBuffer<'_, T>) -> Result<()> {
        if dst.len() != src.len() {
            return Err(Error::with_message(
                qd_sys::QD_ERROR_INVALID_ARGUMENT,
                format!("peer copy of {} elements into a buffer of {}", src.len(), dst.len()),
            ));
        }
        // SAFETY: both ranges are whole live allocations of the contexts named with them.
        check(unsafe {
            qd_sys::qd_memcpy_peer_async(self.raw(), dst.addr, dst.ctx.raw(), src.addr, src.ctx.raw(), dst.byte_len())
        })?;
        dst.note_use(self);
        src.note_use(self);
        Ok(())
    }

    /// Copy `src` (a borrowed slice) into `dst` and wait until the copy has run.
    ///
    /// The slice is first copied into memory this call owns, so the asynchronous copy never
    /// reads the borrowed slice, even if waiting fails. For copies that do not wait, use
    /// [`Stream::copy_to_device_async`] with an owned buffer.
    pub fn copy_from_slice<T: Pod>(&self, dst: &DeviceBuffer<'_, T>, src: &[T]) -> Result<()> {
        let transfer = self.copy_to_device_async(dst, src.to_vec())?;
        transfer.wait().map(drop)
    }

    /// Copy `src` into `dst` (a borrowed slice, same length) and wait until the copy has run.
    ///
    /// The device data lands in memory this call owns first, and reaches `dst` only after the
    /// wait succeeded; on an error `dst` is left as it was.
    pub fn copy_to_slice<T: Pod>(&self, dst: &mut [T], src: &DeviceBuffer<'_, T>) -> Result<()> {
        if dst.len() != src.len() {
            // Refused before the staging copy is allocated.
            return Err(Error::with_message(
                qd_sys::QD_ERROR_INVALID_ARGUMENT,
                format!("copy of {} elements into {}", src.len(), dst.len()),
            ));
        }
        // Zeroed Pod values are valid values.
        let staging = vec![zeroed::<T>(); dst.len()];
        let filled = self.copy_to_host_async(staging, src)?.wait()?;
        dst.copy_from_slice(&filled);
        Ok(())
    }
}

pub(crate) fn zeroed<T: Pod>() -> T {
    // SAFETY: Pod types accept every bit pattern, all-zero included.
    unsafe { std::mem::zeroed() }
}
