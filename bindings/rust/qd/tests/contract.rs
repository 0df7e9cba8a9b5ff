//! The bindings' contract (README, "The bindings' contract"): parameter indices are the user's;
//! a drop never touches a capture and never fails silently; bad input from safe code is an
//! error, never a crash or an abort; every error carries qd's message once.

mod common;

use common::*;
use qd::{Context, DeviceBuffer, Error, HostKernel, LaunchConfig, ParamAccess, Stream};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

const ONE: LaunchConfig = LaunchConfig::new();

/// A generous bound for conditions that hold at once after a fix and never before it: a
/// failure, not a hang, when they do not.
const NEVER: Duration = Duration::from_secs(60);

#[test]
fn host_kernel_param_access_indices_are_the_users() {
    let ctx = Context::builder().validate_fail(true).build().unwrap();
    // copy(out, inp): the closure touches nothing, validation sees the addresses.
    let copy = HostKernel::new(&ctx, "copy", |_, args| {
        args.get::<qd::DevicePtr>(0)?;
        args.get::<qd::DevicePtr>(1)?;
        Ok(())
    })
    .unwrap();
    copy.set_param_access(1, ParamAccess::Read).unwrap(); // `inp` only reads
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let inp = DeviceBuffer::<u32>::alloc(&a, 4).unwrap();
    let out_a = DeviceBuffer::<u32>::alloc(&a, 4).unwrap();
    let out_b = DeviceBuffer::<u32>::alloc(&a, 4).unwrap();
    ctx.synchronize().unwrap(); // every stream is ordered after the allocations
    a.launch_host(&copy, &ONE, (&out_a, &inp)).unwrap();
    // Two streams reading `inp` and writing their own output: no hazard.
    b.launch_host(&copy, &ONE, (&out_b, &inp)).unwrap();
    // Two streams writing `out_a`: the race is found, on `out_a`.
    let err = b.launch_host(&copy, &ONE, (&out_a, &inp)).unwrap_err();
    assert!(matches!(err, Error::Hazard(_)), "{err}");
    assert!(err.message().contains(&format!("{:x}", out_a.device_ptr().0)), "{err}");
    assert_eq!(ctx.stats().unwrap().hazards_reported, 1);
    // An index past the 16 arguments a host kernel takes is the user's mistake, said as such.
    let err = copy.set_param_access(16, ParamAccess::Read).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    ctx.synchronize().unwrap();
}

#[test]
fn a_buffer_dropped_during_a_capture_is_freed_after_the_capture_ends() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let k = HostKernel::new(&ctx, "use", |_, _| Ok(())).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&s, 16).unwrap();
    s.memset(&buf, 0).unwrap();
    let capture = s.begin_capture().unwrap();
    s.launch_host(&k, &ONE, (&buf,)).unwrap();
    drop(buf); // must not make the default stream join the capture
    let graph = capture.end().expect("the capture ends: the drop did not join it");
    assert!(ctx.take_drop_errors().is_empty());
    let d = ctx.default_stream();
    d.synchronize().expect("the default stream is not capturing");
    ctx.synchronize().unwrap();
    assert_eq!(ctx.stats().unwrap().live_allocations, 0, "the block was freed after the capture");
    drop(graph);
}

#[test]
fn a_buffer_dropped_during_a_capture_is_freed_when_an_abandoned_capture_ends() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u8>::alloc(&s, 8).unwrap();
    let capture = s.begin_capture().unwrap();
    s.memset(&buf, 1).unwrap();
    drop(buf);
    assert_eq!(ctx.stats().unwrap().live_allocations, 1, "not freed into the capture");
    drop(capture);
    ctx.synchronize().unwrap();
    assert_eq!(ctx.stats().unwrap().live_allocations, 0);
    assert!(ctx.take_drop_errors().is_empty());
}

#[test]
fn fork_of_more_streams_than_any_pool_holds_is_pool_exhausted_not_an_abort() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let err = s.fork(u32::MAX).unwrap_err();
    assert!(matches!(err, Error::PoolExhausted(_)), "{err}");
    let err = s.fork(17).unwrap_err(); // a pool of 16
    assert!(matches!(err, Error::PoolExhausted(_)), "{err}");
}

#[test]
fn the_last_arc_context_dropped_in_its_own_host_fn_is_destroyed_on_a_helper_thread() {
    struct Signal(mpsc::Sender<()>);
    impl Drop for Signal {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (released_tx, released) = mpsc::channel();
    let (go_tx, go) = mpsc::channel::<()>();
    let ctx = Arc::new(cpu());
    {
        // A closure the context keeps until it is destroyed: it tells when that happened.
        let signal = Signal(released_tx);
        let _k = HostKernel::new(&ctx, "kept", move |_, _| {
            let _ = &signal;
            Ok(())
        })
        .unwrap();
        let s = Stream::new(&ctx).unwrap();
        let owner = Arc::clone(&ctx);
        s.host_fn(move || {
            go.recv().unwrap();
            drop(owner); // the last reference: dropped inside the context's own callback
        })
        .unwrap();
    }
    drop(ctx);
    go_tx.send(()).unwrap();
    released.recv_timeout(NEVER).expect("the context was destroyed and released its closures");
}

#[test]
fn a_free_on_a_stream_of_another_context_fails_and_still_frees_the_block() {
    let (c1, c2) = (cpu(), cpu());
    let s1 = Stream::new(&c1).unwrap();
    let s2 = Stream::new(&c2).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&s1, 4).unwrap();
    let err = buf.free(&s2).unwrap_err();
    assert!(matches!(err, Error::InvalidAddress(_) | Error::WrongContext(_)), "{err}");
    c1.synchronize().unwrap();
    assert_eq!(c1.stats().unwrap().live_allocations, 0, "the block was not leaked");
    assert!(c1.take_drop_errors().is_empty());
}

#[test]
fn active_guards_dropped_out_of_order_restore_the_stream_before_the_first() {
    let ctx = cpu();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let before = ctx.active_stream_raw().unwrap();
    let ga = a.set_active().unwrap();
    let gb = b.set_active().unwrap();
    drop(ga);
    assert_eq!(ctx.active_stream_raw().unwrap(), b.raw(), "the newest live guard's stream");
    drop(gb);
    assert_eq!(ctx.active_stream_raw().unwrap(), before);
    // In order too, and close() reports.
    let ga = a.set_active().unwrap();
    let gb = b.set_active().unwrap();
    gb.close().unwrap();
    assert_eq!(ctx.active_stream_raw().unwrap(), a.raw());
    ga.close().unwrap();
    assert_eq!(ctx.active_stream_raw().unwrap(), before);
    assert!(ctx.take_drop_errors().is_empty());
}

#[test]
fn a_lease_of_an_unjoined_capture_reports_its_failed_release() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let capture = s.begin_capture().unwrap();
    let mut kids = s.fork(2).unwrap();
    let err = kids.pop().unwrap().close().unwrap_err();
    assert!(matches!(err, Error::InvalidOperation(_)), "{err}");
    drop(kids.pop().unwrap());
    let errors = ctx.take_drop_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(matches!(errors[0], Error::InvalidOperation(_)), "{errors:?}");
    assert!(errors[0].message().starts_with("dropping Lease: "), "{errors:?}");
    assert_eq!(ctx.stats().unwrap().stream_pool_leased, 2);
    // The abandoned capture cannot end either: said too.
    drop(capture);
    let errors = ctx.take_drop_errors();
    assert!(matches!(errors[..], [Error::InvalidOperation(_)]), "{errors:?}");
}

#[test]
fn host_fn_on_a_capturing_stream_names_no_call_the_user_did_not_make() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let capture = s.begin_capture().unwrap();
    let err = s.host_fn(|| {}).unwrap_err();
    assert!(matches!(err, Error::InvalidOperation(_)), "{err}");
    assert!(!err.message().contains("qd_stream_query"), "{err}");
    assert!(err.message().contains("capturing"), "{err}");
    capture.end().unwrap();
}

#[test]
fn a_host_kernel_launched_through_qd_sys_runs_without_arguments_and_faults_on_foreign_ones() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let ctx = cpu();
    let runs = Arc::new(AtomicU32::new(0));
    let seen = runs.clone();
    let k = HostKernel::new(&ctx, "rust kernel", move |_, args| {
        assert!(args.is_empty());
        seen.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
    .unwrap();
    let s = Stream::new(&ctx).unwrap();
    let cfg = qd::sys::QD_LAUNCH_CONFIG_INIT;
    // SAFETY: valid handles, no arguments: the closure runs with none.
    let st = unsafe { qd::sys::qd_launch(s.raw(), k.raw(), &cfg, std::ptr::null(), 0) };
    assert_eq!(st, qd::sys::QD_SUCCESS);
    s.synchronize().unwrap();
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    // An argument this crate did not write (no header): the kernel faults, nothing crashes.
    let word = [0u64; 2];
    let arg = qd::sys::qd_arg { data: word.as_ptr() as *const std::ffi::c_void, size: 16 };
    // SAFETY: valid handles and one 16-byte argument.
    let st = unsafe { qd::sys::qd_launch(s.raw(), k.raw(), &cfg, &arg, 1) };
    assert_eq!(st, qd::sys::QD_SUCCESS);
    let err = s.synchronize().unwrap_err();
    assert!(matches!(err, Error::DeviceLost(_)), "{err}");
    assert!(err.message().contains("rust kernel"), "{err}");
    assert_eq!(runs.load(Ordering::Relaxed), 1);
}

#[test]
fn host_tasks_launch_in_parallel_without_unsafe() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let ctx = cpu();
    let sum = Arc::new(AtomicU64::new(0));
    let sink = sum.clone();
    let add = HostKernel::new(&ctx, "add", move |_, args| {
        sink.fetch_add(args.get::<u64>(0)?, Ordering::Relaxed);
        Ok(())
    })
    .unwrap();
    let tasks: Vec<qd::HostTask> = (0..32u64).map(|i| qd::HostTask::new(&add, (i % 4) as u32, &ONE, (i,))).collect();
    assert_eq!(tasks[5].group(), 1);
    let s = Stream::new(&ctx).unwrap();
    s.launch_host_parallel(&tasks).unwrap();
    s.synchronize().unwrap();
    assert_eq!(sum.load(Ordering::Relaxed), (0..32).sum::<u64>());
}

#[test]
fn a_rust_hazard_handler_receives_each_report() {
    use std::sync::Mutex;
    let ctx = Context::builder().validate(true).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::<qd::Hazard>::new()));
    let sink = seen.clone();
    ctx.set_hazard_handler(move |h| sink.lock().unwrap().push(h.clone())).unwrap();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let buf = DeviceBuffer::<u32>::alloc(&a, 4).unwrap();
    b.memset(&buf, 0).unwrap();
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        let h = &seen[0];
        assert_eq!(h.kind, qd::HazardKind::Race);
        assert_eq!(h.stream, b.raw());
        assert_eq!((h.allocation, h.allocation_bytes, h.offset), (buf.device_ptr().0, 16, 0));
        assert!(h.operation.contains("memset"), "{h:?}");
        assert!(h.message.contains("race"), "{h:?}");
    }
    assert_eq!(ctx.stats().unwrap().hazards_reported, 1);
    // A handler that panics does not unwind into C.
    ctx.set_hazard_handler(|_| panic!("in a hazard handler")).unwrap();
    let c = Stream::new(&ctx).unwrap();
    c.memset(&buf, 1).unwrap();
    assert_eq!(ctx.stats().unwrap().hazards_reported, 2);
    ctx.synchronize().unwrap();
    let off = Context::new(qd::Backend::Cpu).unwrap();
    assert!(matches!(off.set_hazard_handler(|_| {}), Err(Error::InvalidOperation(_))));
}

#[test]
fn elapsed_since_is_a_duration_and_never_negative() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let (start, end) = (qd::Event::with_timing(&ctx).unwrap(), qd::Event::with_timing(&ctx).unwrap());
    start.record(&s).unwrap();
    end.record(&s).unwrap();
    end.synchronize().unwrap();
    let d: Duration = end.elapsed_since(&start).unwrap();
    let ms = end.elapsed_ms_since(&start).unwrap();
    assert!((d.as_secs_f64() * 1000.0 - f64::from(ms)).abs() < 1e-3);
    let back = start.elapsed_ms_since(&end).unwrap();
    if back < 0.0 {
        assert!(matches!(start.elapsed_since(&end), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn a_failed_drop_is_kept_until_read_and_close_reports_it() {
    let ctx = cpu();
    {
        let s = Stream::new(&ctx).unwrap();
        let capture = s.begin_capture().unwrap();
        drop(s.fork(1).unwrap()); // a lease of the open capture: its release is refused
        drop(capture); // and the capture cannot end
    } // nor can its origin stream be destroyed
    let err = ctx.close().unwrap_err();
    assert!(matches!(err, Error::InvalidOperation(_)), "{err}");
    assert!(err.message().contains("3 drop failure(s) never read"), "{err}");
    for what in ["dropping Lease: ", "dropping Capture: ", "dropping Stream: "] {
        assert!(err.message().contains(what), "{err}");
    }
}

#[test]
fn close_releases_at_once_and_reports_success() {
    let ctx = cpu();
    let before = ctx.stats().unwrap();
    let m = load(&ctx);
    let k = m.kernel("qd_test_noop").unwrap();
    let hk = HostKernel::new(&ctx, "hk", |_, _| Ok(())).unwrap();
    let (s, lease, e) = (Stream::new(&ctx).unwrap(), ctx.acquire().unwrap(), qd::Event::new(&ctx).unwrap());
    let hb = qd::HostBuffer::<u8>::alloc(&ctx, 64).unwrap();
    let g = s.begin_capture().unwrap().end().unwrap();
    let during = ctx.stats().unwrap();
    assert_eq!(during.live_kernels, before.live_kernels + 2);
    k.close().unwrap();
    hk.close().unwrap();
    m.close().unwrap();
    g.close().unwrap();
    e.close().unwrap();
    lease.close().unwrap();
    s.close().unwrap();
    hb.close().unwrap();
    let after = ctx.stats().unwrap();
    assert_eq!(
        (after.live_kernels, after.live_modules, after.live_graphs, after.live_events, after.live_streams),
        (before.live_kernels, before.live_modules, before.live_graphs, before.live_events, before.live_streams)
    );
    assert_eq!((after.stream_pool_leased, after.host_bytes_allocated), (0, 0));
    assert!(ctx.take_drop_errors().is_empty());
    ctx.close().unwrap();
}
