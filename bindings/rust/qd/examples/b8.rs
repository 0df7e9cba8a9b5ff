//! Benchmark B8 (bench/RESULTS.md) for Rust: the cost of the safe API over the raw C
//! call, both sides in one binary, alternated batch by batch.
//!
//! 1. A no-op qd call: `qd_stream_query` on an idle stream, through `Stream::query` against
//!    `qd_sys::qd_stream_query`. Bar: at most +2 ns.
//! 2. A launch of an empty host kernel, against `qd_sys::qd_launch` of an empty C kernel with no
//!    argument on the same stream: the unsafe `Stream::launch` of that kernel, and the safe
//!    `Stream::launch_host` of an empty Rust closure kernel (`HostKernel`: a launch without
//!    arguments passes none, and the kernel's own trampoline finds its closure). Bar: at most
//!    1.05x each. (The stream is synchronised between batches, outside the timed loops.) For
//!    information, the raw launch with one 16-byte argument, the hidden header that
//!    `launch_host` adds in front of a launch's arguments when it has any.
//!
//! Each side reduces its result to a bool that `black_box` keeps (the C status compared with 0,
//! the `Result` tested with `is_ok`, as `?` would), so neither side pays for keeping a larger
//! value alive that the other does not.
//!
//! Run: `cargo run --release --offline --example b8 [REPS] [CALLS] [LAUNCHES]`
//! (defaults 201 batches of 20000 queries and of 2000 launches). Prints the minimum and median
//! per-call nanoseconds of each side, their difference and ratio.

use qd::{Backend, Context, Kernel, LaunchConfig, Stream};
use std::hint::black_box;
use std::time::Instant;

unsafe extern "C" fn empty(_: *const qd::sys::qd_host_kernel_info, _: *const *mut std::ffi::c_void) -> i32 {
    0
}

struct Stats {
    min: f64,
    median: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Stats { min: v[0], median: v[v.len() / 2] }
}

fn per_call(n: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64 / n as f64
}

fn report(what: &str, raw: Stats, safe: Stats, bar: &str) {
    println!("{what}");
    println!("  raw FFI : min {:8.2} ns  median {:8.2} ns", raw.min, raw.median);
    println!("  qd crate: min {:8.2} ns  median {:8.2} ns", safe.min, safe.median);
    println!(
        "  crate - raw: min {:+.2} ns, median {:+.2} ns; crate / raw: min {:.3}x, median {:.3}x   (bar: {bar})",
        safe.min - raw.min,
        safe.median - raw.median,
        safe.min / raw.min,
        safe.median / raw.median
    );
}

fn main() -> qd::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let reps = args.first().copied().unwrap_or(201);
    let calls = args.get(1).copied().unwrap_or(20_000);
    let launches = args.get(2).copied().unwrap_or(2_000);

    let ctx = Context::new(Backend::Cpu)?;
    let stream = Stream::new(&ctx)?;
    let raw_stream = stream.raw();
    stream.synchronize()?;

    // 1. No-op call.
    let (mut raw_q, mut safe_q) = (Vec::new(), Vec::new());
    for rep in 0..reps + 1 {
        let raw_side = || {
            per_call(calls, || {
                for _ in 0..calls {
                    // SAFETY: a valid stream handle.
                    black_box(unsafe { qd::sys::qd_stream_query(black_box(raw_stream)) } == 0);
                }
            })
        };
        let safe_side = || {
            per_call(calls, || {
                for _ in 0..calls {
                    black_box(matches!(black_box(&stream).query(), Ok(true)));
                }
            })
        };
        // Alternate which side goes first, so that neither always follows the other.
        let (r, s) = if rep % 2 == 0 { let r = raw_side(); (r, safe_side()) } else { let s = safe_side(); (raw_side(), s) };
        if rep > 0 {
            // The first batch warms caches and is not counted.
            raw_q.push(r);
            safe_q.push(s);
        }
    }
    assert_eq!(stream.query(), Ok(true), "the stream stays idle");

    // 2. Launches. The raw side is C's qd_launch of an empty C host kernel with no argument;
    // the unsafe `Stream::launch` of that kernel and the safe `Stream::launch_host` of an empty
    // Rust closure kernel are each compared with it. For information, a raw launch with one
    // 16-byte argument (the size of the header every launch_host passes) shows what that
    // argument costs qd. Every side runs in every batch, in a rotating order; the stream is
    // synchronised after each side, outside its timed loop.
    // SAFETY: `empty` reads nothing and returns 0.
    let kernel = unsafe { Kernel::from_raw_host_fn(&ctx, empty, "empty")? };
    let closure = qd::HostKernel::new(&ctx, "empty closure", |_, _| Ok(()))?;
    let raw_kernel = kernel.raw();
    let cfg = LaunchConfig::new();
    let raw_cfg = qd::sys::QD_LAUNCH_CONFIG_INIT;
    let sixteen = [0u64; 2];
    let arg16 = qd::sys::qd_arg { data: sixteen.as_ptr() as *const std::ffi::c_void, size: 16 };
    let mut times: [Vec<f64>; 4] = Default::default();
    for rep in 0..reps + 1 {
        let mut batch = [0f64; 4];
        for k in 0..4 {
            let side = (rep + k) % 4;
            batch[side] = per_call(launches, || match side {
                0 => {
                    for _ in 0..launches {
                        // SAFETY: valid handles; no arguments.
                        let st = unsafe { qd::sys::qd_launch(raw_stream, raw_kernel, &raw_cfg, std::ptr::null(), 0) };
                        black_box(st == 0);
                    }
                }
                1 => {
                    for _ in 0..launches {
                        // SAFETY: the kernel takes no arguments.
                        black_box(unsafe { stream.launch(&kernel, &cfg, ()) }.is_ok());
                    }
                }
                2 => {
                    for _ in 0..launches {
                        black_box(stream.launch_host(&closure, &cfg, ()).is_ok());
                    }
                }
                _ => {
                    for _ in 0..launches {
                        // SAFETY: valid handles; the kernel ignores its argument.
                        let st = unsafe { qd::sys::qd_launch(raw_stream, raw_kernel, &raw_cfg, black_box(&arg16), 1) };
                        black_box(st == 0);
                    }
                }
            });
            stream.synchronize()?;
        }
        if rep > 0 {
            for (t, b) in times.iter_mut().zip(batch) {
                t.push(b);
            }
        }
    }

    println!("B8 (Rust), {reps} batches; libqd {:#x}", qd::version());
    report(&format!("no-op call: qd_stream_query on an idle stream ({calls} calls/batch)"), stats(raw_q), stats(safe_q), "+2 ns");
    let [raw_l, unsafe_l, safe_l, raw16_l] = times;
    let raw_l = stats(raw_l);
    let raw_median = raw_l.median;
    let raw_min = raw_l.min;
    report(
        &format!("launch of an empty host kernel, unsafe Stream::launch ({launches} launches/batch)"),
        raw_l,
        stats(unsafe_l),
        "1.05x",
    );
    report(
        &format!("launch of an empty host kernel, safe Stream::launch_host of a Rust closure ({launches} launches/batch)"),
        Stats { min: raw_min, median: raw_median },
        stats(safe_l),
        "1.05x",
    );
    let r16 = stats(raw16_l);
    println!(
        "  (info) raw qd_launch with one 16-byte argument (the header launch_host adds to a launch with arguments): min {:.2} ns, median {:.2} ns ({:.3}x raw median)",
        r16.min,
        r16.median,
        r16.median / raw_median
    );
    Ok(())
}
