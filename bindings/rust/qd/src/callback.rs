//! Host callbacks in stream order ([`Stream::host_fn`], and [`Stream::host_fn_with_status`],
//! called whatever happens to the context), panic-safe.
//!
//! A panic in a callback is caught in the C trampoline (it never unwinds into C). On the CPU
//! backend it then faults the context as a C kernel returning non-zero does: every callback is
//! followed on its stream by a tiny guard kernel that returns non-zero when its callback
//! panicked, so later work on the stream fails with `DEVICE_LOST` and the message names
//! "qd-rust host callback panicked". GPU backends cannot run host kernels; there the panic is
//! caught and reported on stderr only.

use crate::context::Context;
use crate::error::{check, Result};
use crate::stream::Stream;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

// What a callback calls: host_fn's closure, or host_fn_with_status's, which learns the status.
enum Call {
    Plain(Box<dyn FnOnce() + Send + 'static>),
    Status(Box<dyn FnOnce(Result<()>) + Send + 'static>),
}

struct Slot {
    f: Mutex<Option<Call>>,
    panicked: AtomicBool,
}

impl Stream<'_> {
    /// Queue `f` to run on a host thread after all earlier work on this stream; later work
    /// waits for it. If this call fails, `f` is never called (it is dropped).
    ///
    /// `f` must not call blocking qd functions of the same context (they return
    /// [`crate::Error::InvalidOperation`] there). A panic in `f` is caught; on the CPU backend
    /// it faults the context.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let (tx, rx) = mpsc::channel();
    /// s.host_fn(move || tx.send(42).unwrap())?;
    /// s.synchronize()?;
    /// assert_eq!(rx.recv().unwrap(), 42);
    /// # Ok::<(), qd::Error>(())
    /// ```
    ///
    /// Errors: [`crate::Error::InvalidOperation`] when the stream is capturing a graph
    /// ([`crate::Capture`]): `f` runs once, and a graph would call it on every replay.
    pub fn host_fn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        self.refuse_if_capturing()?;
        self.queue_call(Call::Plain(Box::new(f)))
    }

    /// Queue `f` as [`Stream::host_fn`] does, but `f` is called exactly once whatever happens
    /// to the context (`qd_launch_host_status_fn`, as CuPy's `add_callback`), so cleanup code
    /// runs either way: with `Ok(())` when it ran in turn after all earlier work; with
    /// [`crate::Error::DeviceLost`] when the context was lost before its turn (it is then called
    /// when the context is destroyed at the latest); with [`crate::Error::InvalidHandle`] when
    /// the context's destroy began before its turn. If this call fails, `f` is never called.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// let ctx = qd::Context::new(qd::Backend::Cpu)?;
    /// let s = qd::Stream::new(&ctx)?;
    /// let (tx, rx) = mpsc::channel();
    /// s.host_fn_with_status(move |status| tx.send(status.is_ok()).unwrap())?;
    /// s.synchronize()?;
    /// assert!(rx.recv().unwrap());
    /// # Ok::<(), qd::Error>(())
    /// ```
    ///
    /// Errors: [`crate::Error::InvalidOperation`] when the stream is capturing a graph (a
    /// replay the loss drops could not call it): nothing is queued, the capture goes on.
    pub fn host_fn_with_status<F: FnOnce(Result<()>) + Send + 'static>(&self, f: F) -> Result<()> {
        self.queue_call(Call::Status(Box::new(f)))
    }

    fn queue_call(&self, call: Call) -> Result<()> {
        let with_status = matches!(call, Call::Status(_));
        let slot = Arc::new(Slot { f: Mutex::new(Some(call)), panicked: AtomicBool::new(false) });
        let guard = if self.context().is_cpu() { Some(guard_kernel(self.context())?) } else { None };
        let for_callback = Arc::into_raw(slot.clone()) as *mut c_void;
        let status = if with_status {
            // SAFETY: `status_callback` has the C signature; it takes back the Arc reference
            // passed here, and qd calls it exactly once after a success.
            unsafe { qd_sys::qd_launch_host_status_fn(self.raw(), Some(status_callback), for_callback) }
        } else {
            // SAFETY: `callback` has the C signature; it takes back the Arc reference passed here.
            unsafe { qd_sys::qd_launch_host_fn(self.raw(), Some(callback), for_callback) }
        };
        if status != qd_sys::QD_SUCCESS {
            // SAFETY: qd never calls the callback after a failure: the reference is still ours.
            drop(unsafe { Arc::from_raw(for_callback as *const Slot) });
            return check(status);
        }
        if let Some(kernel) = guard {
            let for_guard = Arc::into_raw(slot) as u64;
            let arg = qd_sys::qd_arg { data: &for_guard as *const u64 as *const c_void, size: 8 };
            // SAFETY: the guard kernel reads one u64, the Arc reference it takes back.
            let st = unsafe { qd_sys::qd_launch(self.raw(), kernel, std::ptr::null(), &arg, 1) };
            if st != qd_sys::QD_SUCCESS {
                // SAFETY: not queued, so the reference is still ours. The callback is queued and
                // runs; only the fault after a panic is lost (the context is lost already if
                // this failed for DEVICE_LOST).
                drop(unsafe { Arc::from_raw(for_guard as *const Slot) });
            }
        }
        Ok(())
    }
}

impl Stream<'_> {
    // A capturing stream refuses qd_stream_query with a message saying so (qd.h, "Graphs");
    // any other outcome means it is not capturing.
    fn refuse_if_capturing(&self) -> Result<()> {
        // SAFETY: plain handle call.
        let status = unsafe { qd_sys::qd_stream_query(self.raw()) };
        if status == qd_sys::QD_ERROR_INVALID_OPERATION && crate::error::Error::from_last(status).message().contains("is capturing") {
            // The message of the query is not repeated: the caller never made that call.
            return Err(crate::error::Error::with_message(
                status,
                format!(
                    "host_fn: stream {:#018x} is capturing (Stream::begin_capture); its closure runs once, and a graph would call it on every replay",
                    self.raw()
                ),
            ));
        }
        Ok(())
    }
}

fn guard_kernel(ctx: &Context) -> Result<qd_sys::qd_kernel> {
    if let Some(k) = ctx.callback_guard.get() {
        return Ok(*k);
    }
    let mut raw = 0;
    // SAFETY: `guard` has the C signature; the name is a NUL-terminated literal.
    check(unsafe {
        qd_sys::qd_kernel_from_host_fn(ctx.raw(), Some(guard), c"qd-rust host callback panicked".as_ptr(), &mut raw)
    })?;
    if ctx.callback_guard.set(raw).is_err() {
        // Another thread made one first; this one is not needed.
        // SAFETY: our own, unused handle.
        unsafe { qd_sys::qd_kernel_destroy(raw) };
    }
    Ok(*ctx.callback_guard.get().expect("set above"))
}

unsafe extern "C" fn callback(user_data: *mut c_void) {
    // SAFETY: `user_data` is the Arc reference host_fn passed for this call.
    let slot = unsafe { Arc::from_raw(user_data as *const Slot) };
    run(&slot, qd_sys::QD_SUCCESS);
}

unsafe extern "C" fn status_callback(_stream: qd_sys::qd_stream, status: qd_sys::qd_status, user_data: *mut c_void) {
    // SAFETY: `user_data` is the Arc reference host_fn_with_status passed for this call.
    let slot = unsafe { Arc::from_raw(user_data as *const Slot) };
    run(&slot, status);
}

// Calls the slot's closure once, catching a panic (it never unwinds into C).
fn run(slot: &Slot, status: i32) {
    let call = slot.f.lock().unwrap_or_else(|p| p.into_inner()).take();
    let result = match call {
        Some(Call::Plain(f)) => catch_unwind(AssertUnwindSafe(f)),
        Some(Call::Status(f)) => {
            let outcome = if status == qd_sys::QD_SUCCESS {
                Ok(())
            } else {
                Err(crate::error::Error::with_message(
                    status,
                    if status == qd_sys::QD_ERROR_DEVICE_LOST {
                        "the context was lost before this host callback's turn"
                    } else {
                        "the context was destroyed before this host callback's turn"
                    },
                ))
            };
            catch_unwind(AssertUnwindSafe(move || f(outcome)))
        }
        None => Ok(()),
    };
    if let Err(payload) = result {
        slot.panicked.store(true, Ordering::Release);
        std::mem::forget(payload);
    }
}

unsafe extern "C" fn guard(_info: *const qd_sys::qd_host_kernel_info, args: *const *mut c_void) -> i32 {
    // SAFETY: args[0] is qd's copy of the u64 that host_fn passed: an Arc reference to take back.
    let slot = unsafe { Arc::from_raw((*args as *const u64).read_unaligned() as *const Slot) };
    i32::from(slot.panicked.load(Ordering::Acquire))
}
