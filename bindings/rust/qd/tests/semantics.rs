//! Stream semantics through the safe API, on the CPU backend: ordering across streams through
//! events, fork/join, parallel launch, argument lifetime, stream-ordered memory and timing.
//! Every test waits on conditions (events, synchronize, a flag the kernel waits for); none
//! sleeps.

mod common;

use common::*;
use qd::{DeviceBuffer, Event, LaunchConfig, Stream, Task};

const ONE: LaunchConfig = LaunchConfig::new();

#[test]
fn work_on_one_stream_runs_in_queue_order() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let log = DeviceBuffer::<u32>::alloc(&s, 65).unwrap();
    s.memset(&log, 0).unwrap();
    for i in 0..64u32 {
        // SAFETY: append_log(u64 log, u32 value) on a live buffer of 65 u32.
        unsafe { s.launch(&k.append_log, &ONE, (&log, i)).unwrap() };
    }
    let mut out = [0u32; 65];
    s.copy_to_slice(&mut out, &log).unwrap();
    assert_eq!(out[0], 64);
    assert!(out[1..].iter().enumerate().all(|(i, &v)| v == i as u32), "{out:?}");
}

#[test]
fn an_event_orders_a_consumer_stream_after_a_delayed_producer() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let (producer, consumer) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    for trial in 0..20u32 {
        let src = DeviceBuffer::<u32>::alloc(&producer, 1).unwrap();
        let dst = DeviceBuffer::<u32>::alloc(&producer, 1).unwrap();
        producer.memset(&dst, 0).unwrap();
        // SAFETY: spin_write(u64 dst, u32 value, u64 us) and add_value(u64 dst, u64 src, u32 add)
        // on live one-element buffers; all work is synchronised before they drop.
        unsafe { producer.launch(&k.spin_write, &ONE, (&src, 100 + trial, 2000u64)).unwrap() };
        let ready = Event::new(&ctx).unwrap();
        ready.record(&producer).unwrap();
        consumer.wait_event(&ready).unwrap();
        unsafe { consumer.launch(&k.add_value, &ONE, (&dst, &src, 1u32)).unwrap() };
        let mut out = [0u32];
        consumer.copy_to_slice(&mut out, &dst).unwrap();
        assert_eq!(out[0], 101 + trial, "the consumer ran before the producer's write");
    }
}

#[test]
fn fork_children_start_after_the_parent_and_join_orders_the_parent_after_them() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let parent = Stream::new(&ctx).unwrap();
    let flag = DeviceBuffer::<u32>::alloc(&parent, 1).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&parent, 4).unwrap();
    parent.memset(&out, 0).unwrap();
    // SAFETY: as in the tests above; buffers outlive the synchronisation at the end.
    unsafe { parent.launch(&k.spin_write, &ONE, (&flag, 7u32, 3000u64)).unwrap() };
    let children = parent.fork(4).unwrap();
    assert_eq!(ctx.stats().unwrap().stream_pool_leased, 4);
    for (i, child) in children.iter().enumerate() {
        let slot = out.device_ptr().offset(4 * i as u64);
        unsafe { child.launch(&k.add_value, &ONE, (slot, &flag, i as u32)).unwrap() };
    }
    parent.join(children).unwrap();
    assert_eq!(ctx.stats().unwrap().stream_pool_leased, 0, "join gives the leases back");
    let mut got = [0u32; 4];
    parent.copy_to_slice(&mut got, &out).unwrap();
    assert_eq!(got, [7, 8, 9, 10]);
}

#[test]
fn parallel_tasks_start_after_earlier_work_and_the_stream_waits_for_all_of_them() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let flag = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&s, 16).unwrap();
    let logs = DeviceBuffer::<u32>::alloc(&s, 4 * 5).unwrap();
    s.memset(&logs, 0).unwrap();
    // SAFETY: as above.
    unsafe { s.launch(&k.spin_write, &ONE, (&flag, 40u32, 3000u64)).unwrap() };
    let mut tasks: Vec<Task> = (0..16u32)
        .map(|i| Task::new(&k.add_value, i % 4, &ONE, (out.device_ptr().offset(4 * i as u64), &flag, i)))
        .collect();
    // Each group also appends its index in order to its own log: order within a group holds.
    for i in 0..16u32 {
        let g = i % 4;
        tasks.push(Task::new(&k.append_log, g, &ONE, (logs.device_ptr().offset(20 * g as u64), i / 4)));
    }
    unsafe { s.launch_parallel(&tasks).unwrap() };
    let mut got = [0u32; 16];
    s.copy_to_slice(&mut got, &out).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == 40 + i as u32), "{got:?}");
    let mut l = [0u32; 20];
    s.copy_to_slice(&mut l, &logs).unwrap();
    for g in 0..4 {
        assert_eq!(&l[g * 5..g * 5 + 5], &[4, 0, 1, 2, 3], "group {g}");
    }
}

#[test]
fn caller_arguments_overwritten_right_after_launch_do_not_reach_the_kernel() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let streams: Vec<Stream> = (0..4).map(|_| Stream::new(&ctx).unwrap()).collect();
    let out = DeviceBuffer::<u64>::alloc(&streams[0], 64).unwrap();
    streams[0].memset(&out, 0).unwrap();
    streams[0].synchronize().unwrap();
    // One blob and one index, reused for every launch and overwritten right after each.
    let mut blob = [0u8; 256];
    let mut expected = Vec::new();
    for i in 0..64u32 {
        for (j, b) in blob.iter_mut().enumerate() {
            *b = (i as usize * 31 + j) as u8;
        }
        expected.push(blob_checksum(&blob, i));
        let s = &streams[i as usize % 4];
        // A delay first, so that the arguments are read long after the caller changed them.
        // SAFETY: spin(u64 us); check_blob(u64 out, u32 index, 256-byte blob) on a live buffer.
        unsafe { s.launch(&k.spin, &ONE, (200u64,)).unwrap() };
        unsafe { s.launch(&k.check_blob, &ONE, (&out, i, blob)).unwrap() };
        blob.fill(0xEE);
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    let mut got = vec![0u64; 64];
    streams[0].copy_to_slice(&mut got, &out).unwrap();
    assert_eq!(got, expected);
}

#[test]
fn a_free_waits_for_copies_queued_on_other_streams_before_the_memory_is_reused() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    for _ in 0..10 {
        let buf = DeviceBuffer::<u32>::alloc(&a, 1024).unwrap();
        a.synchronize().unwrap();
        // B is held back by a spin, then writes 0xAB over the whole buffer.
        // SAFETY: spin(u64 us).
        unsafe { b.launch(&k.spin, &ONE, (3000u64,)).unwrap() };
        b.memset(&buf, 0xAB).unwrap();
        buf.free(&a).unwrap(); // ordered after B's memset by the buffer itself
        let fresh = DeviceBuffer::<u32>::alloc(&a, 1024).unwrap();
        a.memset(&fresh, 0x11).unwrap();
        let mut got = vec![0u32; 1024];
        a.copy_to_slice(&mut got, &fresh).unwrap();
        assert!(got.iter().all(|&v| v == 0x1111_1111), "B's late write reached a reused block");
        b.synchronize().unwrap();
    }
}

#[test]
fn owned_async_copies_keep_their_buffer_until_waited() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let dev = DeviceBuffer::<u64>::alloc(&s, 1000).unwrap();
    let src: Vec<u64> = (0..1000).collect();
    let up = s.copy_to_device_async(&dev, src).unwrap();
    let down = s.copy_to_host_async(vec![0u64; 1000], &dev).unwrap();
    let back = down.wait().unwrap();
    assert!(up.is_done().unwrap());
    let src = up.wait().unwrap();
    assert_eq!(back, src);
    // A transfer dropped without wait waits in Drop.
    let pinned = qd::HostBuffer::<u64>::alloc(&ctx, 1000).unwrap();
    drop(s.copy_to_host_async(pinned, &dev).unwrap());
}

#[test]
fn elapsed_time_covers_a_spin_kernel_between_two_timed_events() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let (start, end) = (Event::with_timing(&ctx).unwrap(), Event::with_timing(&ctx).unwrap());
    start.record(&s).unwrap();
    // SAFETY: spin(u64 us).
    unsafe { s.launch(&k.spin, &ONE, (20_000u64,)).unwrap() };
    end.record(&s).unwrap();
    end.synchronize().unwrap();
    let ms = end.elapsed_ms_since(&start).unwrap();
    // The kernel sleeps at least 20 ms between the two records: a lower bound, not a guess.
    assert!(ms >= 19.9, "elapsed {ms} ms for a 20 ms spin");
}

#[test]
fn queries_and_elapsed_time_report_not_ready_until_a_held_kernel_is_released() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let words = DeviceBuffer::<u32>::alloc(&s, 2).unwrap();
    s.memset(&words, 0).unwrap();
    s.synchronize().unwrap(); // the memset must not land after the host opens the flag
    let (start, end) = (Event::with_timing(&ctx).unwrap(), Event::with_timing(&ctx).unwrap());
    start.record(&s).unwrap();
    // SAFETY: wait_flag(u64 words, u64 timeout_us): waits until words[0] is set.
    unsafe { s.launch(&k.wait_flag, &ONE, (&words, 600_000_000u64)).unwrap() };
    end.record(&s).unwrap();
    assert!(!s.query().unwrap());
    assert!(!end.query().unwrap());
    assert!(matches!(end.elapsed_ms_since(&start), Err(qd::Error::NotReady(_))));
    poke(words.device_ptr(), 1);
    end.synchronize().unwrap();
    s.synchronize().unwrap();
    assert!(s.query().unwrap());
    assert_eq!(peek(words.device_ptr().offset(4)), 1, "the kernel saw the host open the flag");
    assert!(end.elapsed_ms_since(&start).unwrap() >= 0.0);
}

#[test]
fn a_host_callback_runs_after_earlier_work_and_before_later_work() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let v = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let p = v.device_ptr();
    // SAFETY: spin_write(u64 dst, u32 value, u64 us) on a live buffer.
    unsafe { s.launch(&k.spin_write, &ONE, (&v, 5u32, 2000u64)).unwrap() };
    let seen2 = seen.clone();
    s.host_fn(move || seen2.store(peek(p), std::sync::atomic::Ordering::SeqCst)).unwrap();
    unsafe { s.launch(&k.write_value, &ONE, (&v, 9u32)).unwrap() };
    s.synchronize().unwrap();
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 5);
    assert_eq!(peek(p), 9);
}

#[test]
fn rust_host_kernels_see_blocks_grid_and_shared_memory() {
    use std::sync::{Arc, Mutex};
    let ctx = cpu();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let k = qd::HostKernel::new(&ctx, "blocks", move |block, args| {
        let tag = args.get::<u16>(0)?;
        let (idx, grid, dim) = (block.block_idx, block.grid_dim, block.block_dim);
        let shared = block.shared_mem();
        assert!(shared.iter().all(|&b| b == 0), "shared memory starts zeroed");
        shared.fill(1);
        sink.lock().unwrap().push((idx, grid, dim, tag, shared.len()));
        Ok(())
    })
    .unwrap();
    let s = Stream::new(&ctx).unwrap();
    s.launch_host(&k, &LaunchConfig::new().grid(2, 2, 1).block(8, 1, 1).shared_mem(64), (3u16,)).unwrap();
    s.synchronize().unwrap();
    let seen = seen.lock().unwrap();
    let idx: Vec<[u32; 3]> = seen.iter().map(|e| e.0).collect();
    assert_eq!(idx, [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], "row-major block order");
    assert!(seen.iter().all(|e| e.1 == [2, 2, 1] && e.2 == [8, 1, 1] && e.3 == 3 && e.4 == 64));
}

#[test]
fn a_launch_pack_queued_many_times_runs_each_time() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let log = DeviceBuffer::<u32>::alloc(&s, 11).unwrap();
    s.memset(&log, 0).unwrap();
    let pack = qd::LaunchPack::new(&k.append_log, &ONE, (&log, 77u32));
    for _ in 0..10 {
        // SAFETY: append_log on a live buffer of 11 u32.
        unsafe { pack.launch(&s).unwrap() };
    }
    let mut out = [0u32; 11];
    s.copy_to_slice(&mut out, &log).unwrap();
    assert_eq!(out, [10, 77, 77, 77, 77, 77, 77, 77, 77, 77, 77]);
}

#[test]
fn the_default_stream_and_leases_run_work_like_owned_streams() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let d = ctx.default_stream();
    let lease = ctx.acquire().unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&d, 2).unwrap();
    // SAFETY: write_value(u64 dst, u32 value) on a live buffer.
    unsafe { d.launch(&k.write_value, &ONE, (&buf, 1u32)).unwrap() };
    d.synchronize().unwrap();
    unsafe { lease.launch(&k.write_value, &ONE, (buf.device_ptr().offset(4), 2u32)).unwrap() };
    let mut out = [0u32; 2];
    lease.copy_to_slice(&mut out, &buf).unwrap();
    assert_eq!(out, [1, 2]);
}
