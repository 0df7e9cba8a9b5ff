//! GPU: a PTX kernel launched through the safe API on the CUDA backend, ordering across
//! streams with events, timing, host callbacks, and a borrowed (imported) native stream.
//!
//! Without a CUDA device each test prints a SKIP line and passes. With one, the PTX image is
//! $QD_TEST_PTX, else qd_rust_gpu_kernels.ptx next to the test binary or in
//! bindings/rust/target/gpu/, else compiled from tests/kernels/gpu_kernels.cu with nvcc -ptx;
//! a GPU machine without any of them fails the test (it does not skip).

use qd::{Backend, Context, DeviceBuffer, Event, LaunchConfig, Module, Stream};
use std::path::PathBuf;

fn cuda() -> Option<Context> {
    match qd::device_count(Backend::Cuda) {
        Ok(n) if n > 0 => Some(Context::new(Backend::Cuda).expect("CUDA context")),
        Ok(_) => {
            skip("no CUDA device");
            None
        }
        Err(e) => {
            skip(&format!("no CUDA backend ({e})"));
            None
        }
    }
}

/// A SKIP line that shows even when the harness captures test output (it bypasses print!).
fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP: {why}");
}

fn ptx() -> String {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("QD_TEST_PTX") {
        candidates.push(p.into());
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.to_path_buf())) {
        candidates.push(dir.join("qd_rust_gpu_kernels.ptx"));
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    candidates.push(manifest.join("../target/gpu/qd_rust_gpu_kernels.ptx"));
    for c in &candidates {
        if let Ok(text) = std::fs::read_to_string(c) {
            return text;
        }
    }
    let out = std::env::temp_dir().join(format!("qd_rust_gpu_kernels_{}.ptx", std::process::id()));
    let nvcc = if std::path::Path::new("/usr/local/cuda/bin/nvcc").exists() { "/usr/local/cuda/bin/nvcc" } else { "nvcc" };
    let built = std::process::Command::new(nvcc)
        .args(["-ptx", "-arch=compute_75"])
        .arg(manifest.join("tests/kernels/gpu_kernels.cu"))
        .arg("-o")
        .arg(&out)
        .status();
    match built {
        Ok(st) if st.success() => std::fs::read_to_string(&out).unwrap(),
        _ => panic!("a CUDA device but no PTX: looked at {candidates:?} and nvcc failed; set QD_TEST_PTX"),
    }
}

#[test]
fn a_ptx_kernel_adds_one_to_every_element_on_a_cuda_stream() {
    let Some(ctx) = cuda() else { return };
    let ptx = ptx();
    // SAFETY: the project's test PTX; launched with its layout (u64 int32_t* data, u32 n).
    let module = unsafe { Module::load_ptx(&ctx, &ptx) }.unwrap();
    let add_one = module.kernel("qd_test_add_one").unwrap();
    let s = Stream::new(&ctx).unwrap();
    let n = 1 << 20;
    let buf = DeviceBuffer::<i32>::alloc(&s, n).unwrap();
    let src: Vec<i32> = (0..n as i32).collect();
    s.copy_from_slice(&buf, &src).unwrap();
    let cfg = LaunchConfig::new().grid(256, 1, 1).block(256, 1, 1);
    // SAFETY: matches the kernel's parameters; the buffer outlives the synchronisation below.
    unsafe { s.launch(&add_one, &cfg, (&buf, n as u32)).unwrap() };
    let back = s.copy_to_host_async(vec![0i32; n], &buf).unwrap().wait().unwrap();
    assert!(back.iter().enumerate().all(|(i, &v)| v == i as i32 + 1));
    buf.free(&s).unwrap();
    println!("GPU: {} ({:?})", qd::device_info(Backend::Cuda, 0).unwrap().name, s.native_handle().unwrap());
}

#[test]
fn an_event_orders_a_second_cuda_stream_after_a_spinning_kernel_and_times_it() {
    let Some(ctx) = cuda() else { return };
    let ptx = ptx();
    // SAFETY: as above; spin takes (u64 microseconds).
    let module = unsafe { Module::load_ptx(&ctx, &ptx) }.unwrap();
    let (add_one, spin) = (module.kernel("qd_test_add_one").unwrap(), module.kernel("qd_test_spin").unwrap());
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let buf = DeviceBuffer::<i32>::alloc(&a, 1024).unwrap();
    a.memset(&buf, 0).unwrap();
    let (start, end) = (Event::with_timing(&ctx).unwrap(), Event::with_timing(&ctx).unwrap());
    start.record(&a).unwrap();
    // SAFETY: as above.
    unsafe {
        a.launch(&spin, &LaunchConfig::new(), (10_000u64,)).unwrap();
        a.launch(&add_one, &LaunchConfig::new().grid(4, 1, 1).block(256, 1, 1), (&buf, 1024u32)).unwrap();
    }
    end.record(&a).unwrap();
    b.wait_event(&end).unwrap();
    // SAFETY: as above; b is ordered after a's write by the event.
    unsafe { b.launch(&add_one, &LaunchConfig::new().grid(4, 1, 1).block(256, 1, 1), (&buf, 1024u32)).unwrap() };
    let (tx, rx) = std::sync::mpsc::channel();
    b.host_fn(move || tx.send(()).unwrap()).unwrap();
    let mut out = vec![0i32; 1024];
    b.copy_to_slice(&mut out, &buf).unwrap();
    assert!(out.iter().all(|&v| v == 2), "b ran before a's kernels");
    rx.recv().unwrap();
    assert!(end.elapsed_ms_since(&start).unwrap() >= 9.9, "a 10 ms spin between the events");
}

#[test]
fn an_imported_native_stream_runs_work_and_survives_its_borrowed_handle() {
    let Some(ctx) = cuda() else { return };
    let owner = Stream::new(&ctx).unwrap();
    let native = owner.native_handle().unwrap();
    {
        // SAFETY: `owner` keeps the native stream alive longer than the borrowed handle.
        let borrowed = unsafe { Stream::import(&ctx, native) }.unwrap();
        let buf = DeviceBuffer::<u8>::alloc(&borrowed, 64).unwrap();
        borrowed.memset(&buf, 7).unwrap();
        let mut out = [0u8; 64];
        borrowed.copy_to_slice(&mut out, &buf).unwrap();
        assert_eq!(out, [7u8; 64]);
        buf.free(&borrowed).unwrap();
        borrowed.synchronize().unwrap();
    } // forgets the handle; never destroys the native stream
    owner.synchronize().unwrap();
    assert!(owner.query().unwrap());
}
