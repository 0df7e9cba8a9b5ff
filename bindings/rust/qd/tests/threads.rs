//! Threads: Send/Sync checked at compile time, streams and contexts used from several threads,
//! and the active stream kept per thread.

mod common;

use common::*;
use qd::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}

#[test]
fn every_type_but_the_active_guard_is_send_and_sync() {
    // A compile-time check: this function does not build if one bound fails.
    send_sync::<Context>();
    send_sync::<Stream<'static>>();
    send_sync::<Lease<'static>>();
    send_sync::<Event<'static>>();
    send_sync::<Module<'static>>();
    send_sync::<Kernel<'static>>();
    send_sync::<HostKernel<'static>>();
    send_sync::<DeviceBuffer<'static, f32>>();
    send_sync::<HostBuffer<'static, u8>>();
    send_sync::<LaunchPack<'static>>();
    send_sync::<Task<'static>>();
    send_sync::<Transfer<'static, Vec<u32>>>();
    send::<Transfer<'static, HostBuffer<'static, u32>>>();
    send_sync::<Error>();
    send_sync::<DevicePtr>();
    // ActiveGuard is !Send: the compile_fail example of Stream::set_active checks it.
}

#[test]
fn threads_share_one_context_and_stream_and_each_uses_its_own_streams_and_leases() {
    let ctx = cpu();
    let hits = Arc::new(AtomicU32::new(0));
    let h = hits.clone();
    let count = HostKernel::new(&ctx, "count", move |_, args| {
        h.fetch_add(args.get::<u32>(0)?, Ordering::Relaxed);
        Ok(())
    })
    .unwrap();
    let shared = Stream::new(&ctx).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let (ctx, count, shared) = (&ctx, &count, &shared);
            scope.spawn(move || {
                let own = Stream::new(ctx).unwrap();
                for i in 0..50u32 {
                    let lease = ctx.acquire().unwrap();
                    lease.launch_host(count, &LaunchConfig::new(), (1u32,)).unwrap();
                    own.launch_host(count, &LaunchConfig::new(), (1u32,)).unwrap();
                    shared.launch_host(count, &LaunchConfig::new(), (1u32,)).unwrap();
                    if i % 10 == t {
                        let kids = own.fork(2).unwrap();
                        for k in &kids {
                            k.launch_host(count, &LaunchConfig::new(), (1u32,)).unwrap();
                        }
                        own.join(kids).unwrap();
                    }
                    lease.synchronize().unwrap();
                }
                own.synchronize().unwrap();
            });
        }
    });
    ctx.synchronize().unwrap();
    // 4 threads x 50 x 3 launches, plus 5 fork rounds x 2 per thread.
    assert_eq!(hits.load(Ordering::Relaxed), 4 * 50 * 3 + 4 * 5 * 2);
    assert_eq!(ctx.stats().unwrap().stream_pool_leased, 0);
}

#[test]
fn each_thread_keeps_its_own_active_stream() {
    let ctx = cpu();
    let streams: Vec<Stream> = (0..4).map(|_| Stream::new(&ctx).unwrap()).collect();
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        for s in &streams {
            let (ctx, barrier) = (&ctx, &barrier);
            scope.spawn(move || {
                for _ in 0..100 {
                    let guard = s.set_active().unwrap();
                    barrier.wait(); // every thread has set its own before any reads
                    assert_eq!(ctx.active_stream().unwrap().raw(), s.raw());
                    barrier.wait();
                    drop(guard);
                    assert_eq!(ctx.active_stream().unwrap().raw(), ctx.default_stream().raw());
                }
            });
        }
    });
}

#[test]
fn nested_active_guards_restore_in_reverse_order() {
    let ctx = cpu();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let ga = a.set_active().unwrap();
    {
        let _gb = b.set_active().unwrap();
        assert_eq!(ctx.active_stream().unwrap().raw(), b.raw());
    }
    assert_eq!(ctx.active_stream().unwrap().raw(), a.raw());
    drop(ga);
    assert_eq!(ctx.active_stream().unwrap().raw(), ctx.default_stream().raw());
    // A failing set leaves the active stream as it was.
    let other = cpu();
    let foreign = Stream::new(&other).unwrap();
    let _g = a.set_active().unwrap();
    assert!(foreign.set_active().is_ok(), "per (thread, context): another context's stream is fine");
    assert_eq!(ctx.active_stream().unwrap().raw(), a.raw());
}

#[test]
fn a_context_in_a_static_serves_unscoped_threads() {
    let ctx: &'static Context = Box::leak(Box::new(cpu()));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let s = Stream::new(ctx).unwrap();
                let buf = DeviceBuffer::<u32>::alloc(&s, 16).unwrap();
                s.memset(&buf, 1).unwrap();
                let mut out = [0u32; 16];
                s.copy_to_slice(&mut out, &buf).unwrap();
                out.iter().all(|&v| v == 0x0101_0101)
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
    let _ = load; // the module helpers are used by other test files
}
