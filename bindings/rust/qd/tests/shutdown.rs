//! Shutdown (RELIABILITY category 12): a program that exits with live contexts, leases,
//! pending work, a thread still queueing work, and a callback that owns a context's objects,
//! exits 0 with no signal and no panic message, 100 times out of 100 per way of exiting.
//!
//! The program is this test binary run again with QD_RUST_SHUTDOWN_SCENARIO set: the test
//! `shutdown_child` then plays the scenario and returns (the harness exits the process), or
//! calls `std::process::exit(0)` in the middle of it.

mod common;

use common::*;
use qd::{Context, DeviceBuffer, LaunchConfig, Stream};
use std::process::Command;

const RUNS: usize = 100;

fn scenario(exit_now: bool) {
    // A context that is never destroyed, with leases, a pool exhausted by fork, and work queued
    // behind a long kernel on several streams.
    let ctx: &'static Context = Box::leak(Box::new(Context::builder().stream_pool_size(4).build().unwrap()));
    let module: &'static qd::Module<'static> = Box::leak(Box::new(load(ctx)));
    let k: &'static Kernels<'static> = Box::leak(Box::new(Kernels::new(module)));
    let s: &'static Stream<'static> = Box::leak(Box::new(Stream::new(ctx).unwrap()));
    let lease = Box::leak(Box::new(ctx.acquire().unwrap()));
    let kids = Box::leak(Box::new(s.fork(2).unwrap()));
    let buf: &'static DeviceBuffer<'static, u32> = Box::leak(Box::new(DeviceBuffer::alloc(s, 256).unwrap()));
    let cfg = LaunchConfig::new();
    for stream in [s, &**lease, &*kids[0], &*kids[1]] {
        // SAFETY: spin(u64 us) and write_value on a buffer that is never freed.
        unsafe {
            stream.launch(&k.spin, &cfg, (2000u64,)).unwrap();
            stream.launch(&k.write_value, &cfg, (buf, 1u32)).unwrap();
        }
        stream.host_fn(|| {}).unwrap();
    }
    // A second context, owned by a callback's closure chain: a Rust kernel that owns an Arc.
    let other: &'static Context = Box::leak(Box::new(Context::new(qd::Backend::Cpu).unwrap()));
    let keep = std::sync::Arc::new(vec![0u8; 1024]);
    let kernel = Box::leak(Box::new(qd::HostKernel::new(other, "holds an Arc", move |_, _| {
        let _ = keep.len();
        Ok(())
    })
    .unwrap()));
    let os = Box::leak(Box::new(Stream::new(other).unwrap()));
    for _ in 0..100 {
        os.launch_host(kernel, &cfg, ()).unwrap();
    }
    // A thread still queueing work while the process exits.
    std::thread::spawn(move || loop {
        let Ok(l) = ctx.acquire() else { continue };
        // SAFETY: spin(u64 us).
        if unsafe { l.launch(&k.spin, &cfg, (100u64,)) }.is_err() {
            break;
        }
    });
    // A context destroyed normally with work pending: Drop drains it.
    let scoped = Context::new(qd::Backend::Cpu).unwrap();
    let ss = Stream::new(&scoped).unwrap();
    ss.host_fn(|| {}).unwrap();
    if exit_now {
        std::process::exit(0);
    }
}

#[test]
fn shutdown_child() {
    match std::env::var("QD_RUST_SHUTDOWN_SCENARIO").as_deref() {
        Ok("return") => scenario(false),
        Ok("exit") => scenario(true),
        _ => {} // not a child: nothing to do
    }
}

fn run_many(mode: &str) {
    let exe = std::env::current_exe().unwrap();
    let mut failures = Vec::new();
    for i in 0..RUNS {
        let out = Command::new(&exe)
            .args(["shutdown_child", "--exact", "--test-threads=1", "--nocapture"])
            .env("QD_RUST_SHUTDOWN_SCENARIO", mode)
            .env("QD_TEST_CPU_MODULE", cpu_module_path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || stderr.contains("panicked") {
            failures.push(format!("run {i}: {:?}\n{stderr}", out.status));
        }
    }
    assert!(failures.is_empty(), "{} of {RUNS} runs failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn a_program_returning_from_main_with_live_objects_and_pending_work_exits_0_every_time() {
    run_many("return");
}

#[test]
fn a_program_calling_exit_with_live_objects_and_pending_work_exits_0_every_time() {
    run_many("exit");
}
