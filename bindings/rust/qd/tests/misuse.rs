//! Misuse. Stale handles after `Drop` do not compile (the `compile_fail` doctests of Context,
//! Stream, Kernel, DeviceBuffer, join and HostData); here are the run-time errors that remain,
//! each compared with the status the raw C call gives for the same mistake.

mod common;

use common::*;
use qd::{Context, DeviceBuffer, Error, Event, HostKernel, LaunchConfig, Stream};
use qd_sys as sys;

#[test]
fn an_exhausted_pool_gives_pool_exhausted_as_in_c() {
    let ctx = Context::builder().stream_pool_size(2).build().unwrap();
    let a = ctx.acquire().unwrap();
    let _b = ctx.acquire().unwrap();
    let err = ctx.acquire().unwrap_err();
    assert!(matches!(err, Error::PoolExhausted(_)), "{err}");
    let mut raw = 0;
    // SAFETY: valid output.
    assert_eq!(unsafe { sys::qd_stream_acquire(ctx.raw(), &mut raw) }, err.status());
    assert!(matches!(a.fork(1), Err(Error::PoolExhausted(_))));
    drop(a);
    let _c = ctx.acquire().unwrap();
    assert_eq!(ctx.stats().unwrap().stream_pool_leased, 2);
}

#[test]
fn objects_of_two_contexts_in_one_call_give_wrong_context_as_in_c() {
    let (c1, c2) = (cpu(), cpu());
    let s1 = Stream::new(&c1).unwrap();
    let e2 = Event::new(&c2).unwrap();
    let err = e2.record(&s1).unwrap_err();
    assert!(matches!(err, Error::WrongContext(_)), "{err}");
    assert!(!err.message().is_empty());
    // SAFETY: plain handle call.
    assert_eq!(unsafe { sys::qd_event_record(s1.raw(), e2.raw()) }, err.status());
    // A wait may name an event of another context of the same backend (since 0.2).
    s1.wait_event(&e2).unwrap();
    // A lease of another context in a join.
    let lease2 = c2.acquire().unwrap();
    assert!(matches!(s1.join(vec![lease2]), Err(Error::WrongContext(_))));
    assert_eq!(c2.stats().unwrap().stream_pool_leased, 0, "the refused lease was released on drop");
    // A kernel of another context.
    let k2 = HostKernel::new(&c2, "k2", |_, _| Ok(())).unwrap();
    assert!(matches!(s1.launch_host(&k2, &LaunchConfig::new(), ()), Err(Error::WrongContext(_))));
}

#[test]
fn a_faulting_kernel_loses_the_context_with_the_kernel_named_as_in_c() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    // SAFETY: fault() takes no arguments.
    unsafe { s.launch(&k.fault, &LaunchConfig::new(), ()).unwrap() };
    let err = s.synchronize().unwrap_err();
    assert!(matches!(err, Error::DeviceLost(_)), "{err}");
    assert!(err.message().contains("qd_test_fault"), "{err}");
    // Everything that touches the device now fails the same way, as the raw calls do.
    assert!(matches!(Stream::new(&ctx), Err(Error::DeviceLost(_))));
    assert!(matches!(DeviceBuffer::<u8>::alloc(&s, 8), Err(Error::DeviceLost(_))));
    // SAFETY: plain handle call.
    assert_eq!(unsafe { sys::qd_stream_query(s.raw()) }, sys::QD_ERROR_DEVICE_LOST);
    // Bookkeeping still answers, and every Drop below cleans up without a panic.
    assert!(ctx.stats().is_ok());
}

#[test]
fn a_panic_in_a_rust_kernel_is_caught_and_loses_the_context() {
    let ctx = cpu();
    let k = HostKernel::new(&ctx, "panicking kernel", |_, _| panic!("boom in a kernel")).unwrap();
    let s = Stream::new(&ctx).unwrap();
    s.launch_host(&k, &LaunchConfig::new(), ()).unwrap();
    let err = s.synchronize().unwrap_err();
    assert!(matches!(err, Error::DeviceLost(_)), "{err}");
    assert!(err.message().contains("panicking kernel"), "{err}");
}

#[test]
fn a_rust_kernel_reading_an_argument_of_the_wrong_size_faults_instead_of_reading_garbage() {
    let ctx = cpu();
    let k = HostKernel::new(&ctx, "wants u64", |_, args| args.get::<u64>(0).map(drop)).unwrap();
    let s = Stream::new(&ctx).unwrap();
    s.launch_host(&k, &LaunchConfig::new(), (1u64,)).unwrap();
    s.synchronize().unwrap();
    s.launch_host(&k, &LaunchConfig::new(), (1u32,)).unwrap();
    assert!(matches!(s.synchronize(), Err(Error::DeviceLost(_))));
}

#[test]
fn a_panic_in_a_host_callback_is_caught_and_loses_the_context() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    s.host_fn(|| panic!("boom in a callback")).unwrap();
    let err = s.synchronize().unwrap_err();
    assert!(matches!(err, Error::DeviceLost(_)), "{err}");
    assert!(err.message().contains("host callback panicked"), "{err}");
}

#[test]
fn bad_input_gets_the_status_c_gives_never_a_panic() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let noop = HostKernel::new(&ctx, "noop", |_, _| Ok(())).unwrap();
    let zero_grid = LaunchConfig::new().grid(0, 1, 1);
    assert!(matches!(s.launch_host(&noop, &zero_grid, ()), Err(Error::InvalidArgument(_))));
    let huge = LaunchConfig::new().grid(u32::MAX, u32::MAX, 1);
    assert!(matches!(s.launch_host(&noop, &huge, ()), Err(Error::Overflow(_))));
    assert!(matches!(DeviceBuffer::<u8>::alloc(&s, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(DeviceBuffer::<u64>::alloc(&s, usize::MAX), Err(Error::Overflow(_))));
    assert!(matches!(DeviceBuffer::<u8>::alloc(&s, usize::MAX - 8), Err(Error::Overflow(_) | Error::OutOfMemory(_))));
    let buf = DeviceBuffer::<u32>::alloc(&s, 4).unwrap();
    assert!(matches!(s.memset_bytes(&buf, 8, 9, 0), Err(Error::InvalidAddress(_))));
    assert!(matches!(s.memset_bytes(&buf, u64::MAX, 2, 0), Err(Error::InvalidAddress(_))));
    assert!(matches!(s.copy_from_slice(&buf, &[1, 2, 3]), Err(Error::InvalidArgument(_))));
    let mut short = [0u32; 2];
    assert!(matches!(s.copy_to_slice(&mut short, &buf), Err(Error::InvalidArgument(_))));
    assert!(matches!(qd::HostBuffer::<u8>::alloc(&ctx, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(s.fork(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(s.join(Vec::new()), Err(Error::InvalidArgument(_))));
    assert!(matches!(HostKernel::new(&ctx, "nul\0name", |_, _| Ok(())), Err(Error::InvalidArgument(_))));
    assert!(matches!(Context::builder().stream_pool_size(5000).build(), Err(Error::InvalidArgument(_))));
    assert!(matches!(Context::builder().device(1).build(), Err(Error::InvalidArgument(_))));
    assert!(matches!(Context::builder().cpu_worker_threads(257).build(), Err(Error::InvalidArgument(_))));
    // SAFETY: these paths are refused before anything is loaded.
    unsafe {
        assert!(matches!(qd::Module::load_library(&ctx, "no-slash.so"), Err(Error::InvalidArgument(_))));
        assert!(matches!(qd::Module::load_library(&ctx, "/nonexistent/qd.so"), Err(Error::NotFound(_))));
    }
    let m = load(&ctx);
    assert!(matches!(m.kernel("qd_test_nothing"), Err(Error::NotFound(_))));
    assert!(matches!(m.kernel("qd_test_exported_data"), Err(Error::NotFound(_))));
    // Timing errors.
    let (plain, timed) = (Event::new(&ctx).unwrap(), Event::with_timing(&ctx).unwrap());
    assert!(matches!(timed.elapsed_ms_since(&plain), Err(Error::TimingDisabled(_))));
    assert!(matches!(timed.elapsed_ms_since(&Event::with_timing(&ctx).unwrap()), Err(Error::NotRecorded(_))));
    // The CPU backend has no native streams.
    assert!(matches!(s.native_handle(), Err(Error::NotSupported(_))));
    // SAFETY: refused on the CPU backend before the value is used.
    assert!(matches!(unsafe { Stream::import(&ctx, 0x1234) }, Err(Error::NotSupported(_))));
}

#[test]
fn a_destroyed_active_stream_is_an_error_not_a_fallback() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let guard = s.set_active().unwrap();
    std::mem::forget(guard); // keep the stale value set
    let raw = s.raw();
    drop(s);
    let active = ctx.active_stream().unwrap();
    assert_eq!(active.raw(), raw, "the value is returned as set");
    assert!(matches!(active.query(), Err(Error::InvalidHandle(_))));
}

#[test]
fn errors_name_their_status_like_the_library_and_carry_its_message() {
    for &(name, value, _) in sys::QD_STATUS_LIST.iter().skip(1) {
        let e = Error::with_message(value, "m");
        assert_eq!(e.status(), value);
        assert_eq!(e.status_name(), name);
        // SAFETY: qd_status_name returns a static string.
        let lib = unsafe { std::ffi::CStr::from_ptr(sys::qd_status_name(value)) };
        assert_eq!(lib.to_str().unwrap(), name);
        assert_eq!(e.to_string(), format!("{name}: m"));
    }
    let unknown = Error::with_message(-1000, "x");
    assert_eq!(unknown.status(), -1000);
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(unknown);
    assert!(boxed.to_string().contains("x"));
}

#[test]
fn the_message_is_read_on_the_failing_thread_right_after_the_call() {
    let (c1, c2) = (cpu(), cpu());
    let s1 = Stream::new(&c1).unwrap();
    let e2 = Event::new(&c2).unwrap();
    let first = e2.record(&s1).unwrap_err();
    // Another failure on another thread does not change this thread's error.
    std::thread::scope(|t| {
        t.spawn(|| assert!(c1.acquire().is_ok() && DeviceBuffer::<u8>::alloc(&s1, 0).is_err()));
    });
    let again = e2.record(&s1).unwrap_err();
    assert_eq!(first, again);
}

#[test]
fn backend_names_are_the_librarys_names_of_every_backend() {
    use qd::Backend;
    let want = [(Backend::Default, "default"), (Backend::Cpu, "cpu"), (Backend::Cuda, "cuda"), (Backend::Hip, "hip")];
    for (backend, name) in want {
        assert_eq!(backend.name(), name);
        assert_eq!(backend.to_string(), name);
    }
    // The raw call names every value, those that name no backend included.
    for raw in [4u32, 99, u32::MAX] {
        // SAFETY: qd_backend_name takes any value and returns a static string, never NULL.
        let got = unsafe { std::ffi::CStr::from_ptr(sys::qd_backend_name(raw)) };
        assert_eq!(got.to_str().unwrap(), "unknown", "backend {raw}");
    }
}
