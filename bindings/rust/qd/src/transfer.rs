//! Asynchronous copies between host and device: only from and into owned or pinned buffers
//! ([`HostData`]), which a [`Transfer`] keeps alive until the copy has run.

use crate::args::{DevicePtr, KernelArg, Pod};
use crate::context::Context;
use crate::error::{check, Error, Result};
use crate::event::Event;
use crate::memory::{byte_len, DeviceBuffer};
use crate::stream::Stream;
use qd_sys::qd_arg;
use std::ffi::c_void;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Host memory that an asynchronous copy may read or write after the call returns: owned
/// storage whose address does not change when the owner moves (`Vec<T>`, `Box<[T]>`,
/// [`HostBuffer`]). A borrowed slice is not `HostData`, so it cannot be copied asynchronously:
///
/// ```compile_fail,E0277
/// let ctx = qd::Context::new(qd::Backend::Cpu).unwrap();
/// let s = qd::Stream::new(&ctx).unwrap();
/// let dst = qd::DeviceBuffer::<u32>::alloc(&s, 4).unwrap();
/// let data = vec![1u32, 2, 3, 4];
/// let t = s.copy_to_device_async(&dst, &data[..]).unwrap(); // error: `&[u32]` is not HostData
/// ```
///
/// # Safety
/// `host_ptr` must be valid for `host_len` elements (and writable through `host_mut_ptr`)
/// for as long as the value lives, at the same address even after the value is moved, and
/// nothing else may access that memory while the value is owned by a [`Transfer`].
pub unsafe trait HostData: Send {
    /// The element type.
    type Elem: Pod;
    /// Address of the first element.
    fn host_ptr(&self) -> *const Self::Elem;
    /// Writable address of the first element.
    fn host_mut_ptr(&mut self) -> *mut Self::Elem;
    /// Number of elements.
    fn host_len(&self) -> usize;
}

// SAFETY: a Vec's heap buffer does not move when the Vec does; a Transfer owns the Vec.
unsafe impl<T: Pod> HostData for Vec<T> {
    type Elem = T;
    fn host_ptr(&self) -> *const T {
        self.as_ptr()
    }
    fn host_mut_ptr(&mut self) -> *mut T {
        self.as_mut_ptr()
    }
    fn host_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: as for Vec.
unsafe impl<T: Pod> HostData for Box<[T]> {
    type Elem = T;
    fn host_ptr(&self) -> *const T {
        self.as_ptr()
    }
    fn host_mut_ptr(&mut self) -> *mut T {
        self.as_mut_ptr()
    }
    fn host_len(&self) -> usize {
        self.len()
    }
}

/// An asynchronous copy in flight, owning its host buffer until the copy has run.
///
/// [`Transfer::wait`] blocks until then and gives the buffer back. Dropping a transfer also
/// waits. If waiting fails (a lost context), the buffer is leaked rather than freed while the
/// copy might still use it.
///
/// `Send`/`Sync` when the buffer is: it owns the buffer and an event (a handle).
#[must_use = "dropping a transfer waits for the copy"]
pub struct Transfer<'ctx, B: HostData> {
    buf: Option<B>,
    done: Event<'ctx>,
}

impl<B: HostData> fmt::Debug for Transfer<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transfer").field("event", &self.done).finish()
    }
}

impl<B: HostData> Transfer<'_, B> {
    /// Whether the copy has run (never blocks).
    pub fn is_done(&self) -> Result<bool> {
        self.done.query()
    }

    /// Block until the copy has run, and give the buffer back.
    pub fn wait(mut self) -> Result<B> {
        let result = self.done.synchronize();
        let buf = self.buf.take();
        match result {
            Ok(()) => Ok(buf.expect("a transfer holds its buffer until waited")),
            Err(e) => {
                std::mem::forget(buf);
                Err(e)
            }
        }
    }
}

impl<B: HostData> Drop for Transfer<'_, B> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            if let Err(e) = self.done.synchronize() {
                // Leaked rather than freed while the copy might still use it; said, not silent.
                std::mem::forget(buf);
                self.done.context().drop_error(Error::with_message(
                    e.status(),
                    format!("dropping Transfer (its host buffer is leaked): {}", e.message()),
                ));
            }
        }
    }
}

fn length_error(src: usize, dst: usize) -> Error {
    Error::with_message(qd_sys::QD_ERROR_INVALID_ARGUMENT, format!("copy of {src} elements into {dst}"))
}

impl<'ctx> Stream<'ctx> {
    /// Copy an owned host buffer into `dst` (same length) without waiting. The returned
    /// [`Transfer`] owns `src` until the copy has run.
    ///
    /// ```
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let dst = qd::DeviceBuffer::<f32>::alloc(&s, 3)?;
    /// let upload = s.copy_to_device_async(&dst, vec![1.0f32, 2.0, 3.0])?;
    /// // ... queue more work ...
    /// let _src_back = upload.wait()?;
    /// let back = s.copy_to_host_async(vec![0f32; 3], &dst)?.wait()?;
    /// assert_eq!(back, [1.0, 2.0, 3.0]);
    /// # Ok::<(), qd::Error>(())
    /// ```
    pub fn copy_to_device_async<B: HostData>(&self, dst: &DeviceBuffer<'_, B::Elem>, src: B) -> Result<Transfer<'ctx, B>> {
        if src.host_len() != dst.len() {
            return Err(length_error(src.host_len(), dst.len()));
        }
        let bytes = byte_len::<B::Elem>(dst.len())?;
        let event = Event::new(self.context())?;
        dst.note_use(self);
        // SAFETY: src is valid for `bytes` and stays so while the Transfer owns it; dst is a
        // live allocation of that size.
        check(unsafe { qd_sys::qd_memcpy_async(self.raw(), dst.device_ptr().0, src.host_ptr() as u64, bytes) })?;
        self.finish(src, event)
    }

    /// Copy `src` into an owned host buffer (same length) without waiting. The returned
    /// [`Transfer`] gives the filled buffer back from [`Transfer::wait`].
    pub fn copy_to_host_async<B: HostData>(&self, mut dst: B, src: &DeviceBuffer<'_, B::Elem>) -> Result<Transfer<'ctx, B>> {
        if src.len() != dst.host_len() {
            return Err(length_error(src.len(), dst.host_len()));
        }
        let bytes = byte_len::<B::Elem>(src.len())?;
        let event = Event::new(self.context())?;
        src.note_use(self);
        // SAFETY: dst is valid for writes of `bytes` while the Transfer owns it.
        check(unsafe { qd_sys::qd_memcpy_async(self.raw(), dst.host_mut_ptr() as u64, src.device_ptr().0, bytes) })?;
        self.finish(dst, event)
    }

    fn finish<B: HostData>(&self, buf: B, done: Event<'ctx>) -> Result<Transfer<'ctx, B>> {
        if let Err(e) = done.record(self) {
            // The copy is queued but cannot be tracked: wait for the stream, else leak.
            if self.synchronize().is_err() {
                std::mem::forget(buf);
            }
            return Err(e);
        }
        Ok(Transfer { buf: Some(buf), done })
    }
}

/// Pinned (page-locked on GPUs) host memory from `qd_host_alloc`, `len` elements of `T`,
/// zero-initialised. It derefs to a slice, is [`HostData`] for asynchronous copies, and its
/// address can be passed to kernels.
///
/// `Drop` frees it at once (`qd_host_free`): a [`Transfer`] owning it keeps it alive until its
/// copy has run; for kernels, see the `# Safety` of [`Stream::launch`].
///
/// `Send + Sync` like `Box<[T]>`: it owns its elements, and `T: Pod` is `Send + Sync`.
///
/// ```
/// let ctx = qd::Context::new(qd::Backend::Cpu)?;
/// let s = qd::Stream::new(&ctx)?;
/// let mut pinned = qd::HostBuffer::<u64>::alloc(&ctx, 2)?;
/// pinned.copy_from_slice(&[10, 20]);
/// let dev = qd::DeviceBuffer::<u64>::alloc(&s, 2)?;
/// let pinned = s.copy_to_device_async(&dev, pinned)?.wait()?;
/// assert_eq!(&pinned[..], &[10, 20]);
/// # Ok::<(), qd::Error>(())
/// ```
pub struct HostBuffer<'ctx, T: Pod> {
    ptr: NonNull<T>,
    addr: u64,
    len: usize,
    ctx: &'ctx Context,
}

// SAFETY: owns its elements like Box<[T]>; T: Pod is Send + Sync.
unsafe impl<T: Pod> Send for HostBuffer<'_, T> {}
// SAFETY: shared access only reads the elements.
unsafe impl<T: Pod> Sync for HostBuffer<'_, T> {}

impl<T: Pod> fmt::Debug for HostBuffer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuffer").field("addr", &format_args!("{:#x}", self.addr)).field("len", &self.len).finish()
    }
}

impl<'ctx, T: Pod> HostBuffer<'ctx, T> {
    /// Allocate `len` zeroed elements of pinned host memory.
    /// Errors: [`Error::InvalidArgument`] for `len == 0`, [`Error::Overflow`],
    /// [`Error::OutOfMemory`].
    pub fn alloc(ctx: &'ctx Context, len: usize) -> Result<HostBuffer<'ctx, T>> {
        let bytes = byte_len::<T>(len)?;
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid output.
        check(unsafe { qd_sys::qd_host_alloc(ctx.raw(), bytes, &mut out) })?;
        let ptr = NonNull::new(out as *mut T)
            .ok_or_else(|| Error::with_message(qd_sys::QD_ERROR_INTERNAL, "qd_host_alloc returned NULL"))?;
        // SAFETY: `bytes` freshly allocated bytes; zero is a valid T (Pod).
        unsafe { std::ptr::write_bytes(ptr.as_ptr() as *mut u8, 0, bytes as usize) };
        Ok(HostBuffer { ptr, addr: out as u64, len, ctx })
    }

    /// The address, for kernels and raw copies.
    pub fn device_ptr(&self) -> DevicePtr {
        DevicePtr(self.addr)
    }
}

impl<T: Pod> Deref for HostBuffer<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised elements owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> DerefMut for HostBuffer<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, with exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> HostBuffer<'_, T> {
    /// Free the block now (`qd_host_free`). `Drop` does the same and keeps a failure for
    /// [`Context::take_drop_errors`].
    pub fn close(self) -> Result<()> {
        let (ctx, ptr) = (self.ctx, self.ptr);
        std::mem::forget(self);
        // SAFETY: the block was ours.
        check(unsafe { qd_sys::qd_host_free(ctx.raw(), ptr.as_ptr() as *mut c_void) })
    }
}

impl<T: Pod> Drop for HostBuffer<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the block is ours.
        let status = unsafe { qd_sys::qd_host_free(self.ctx.raw(), self.ptr.as_ptr() as *mut c_void) };
        if status != qd_sys::QD_SUCCESS {
            self.ctx.drop_failed("HostBuffer", status);
        }
    }
}

// SAFETY: qd's pinned block does not move with the HostBuffer; a Transfer owns it exclusively.
unsafe impl<T: Pod> HostData for HostBuffer<'_, T> {
    type Elem = T;
    fn host_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }
    fn host_mut_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }
    fn host_len(&self) -> usize {
        self.len
    }
}

/// A pinned buffer's address as a kernel argument.
// SAFETY: `data` points to the 8 bytes of the address inside the buffer value.
unsafe impl<T: Pod> KernelArg for &HostBuffer<'_, T> {
    #[inline(always)]
    fn as_qd_arg(&self) -> qd_arg {
        qd_arg { data: &self.addr as *const u64 as *const c_void, size: 8 }
    }
}
