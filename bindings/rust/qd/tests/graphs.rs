//! Graphs through the safe API, on the CPU backend: a replay equals the captured calls run
//! directly, an update changes the values of later replays, host callbacks are refused inside
//! a capture (the capture goes on), an abandoned capture guard ends the capture, and a capture
//! whose fork was not joined back stays open until it is.

mod common;

use common::*;
use qd::{DeviceBuffer, LaunchConfig, Stream};

const ONE: LaunchConfig = LaunchConfig::new();

#[test]
fn a_replay_equals_the_direct_calls_and_an_update_changes_later_replays() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let src = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    let dst = DeviceBuffer::<u32>::alloc(&s, 2).unwrap();
    s.copy_from_slice(&src, &[5]).unwrap();
    let capture = |add: u32| {
        let c = s.begin_capture().unwrap();
        let kids = s.fork(1).unwrap();
        // SAFETY: add_value(u64 dst, u64 src, u32 add) on live one-element views; the buffers
        // outlive every replay (all synchronised before they drop).
        unsafe { kids[0].launch(&k.add_value, &ONE, (&dst, &src, add)).unwrap() };
        s.join(kids).unwrap();
        s.memset_bytes(&dst, 4, 4, 7).unwrap();
        c.end().unwrap()
    };
    let graph = capture(1);
    let mut out = [0u32; 2];
    s.copy_to_slice(&mut out, &dst).unwrap();
    assert_eq!(out, [0, 0], "captured work ran during the capture");
    for _ in 0..5 {
        s.memset(&dst, 0).unwrap();
        // SAFETY: src and dst are live.
        unsafe { graph.launch(&s).unwrap() };
        s.copy_to_slice(&mut out, &dst).unwrap();
        assert_eq!(out, [6, 0x0707_0707]);
    }
    let fresh = capture(100);
    graph.update(&fresh).unwrap();
    drop(fresh);
    s.memset(&dst, 0).unwrap();
    // SAFETY: as above.
    unsafe { graph.launch(&s).unwrap() };
    s.copy_to_slice(&mut out, &dst).unwrap();
    assert_eq!(out, [105, 0x0707_0707], "the update did not reach the replay");
    assert_eq!(ctx.stats().unwrap().live_graphs, 1);
    drop(graph);
    assert_eq!(ctx.stats().unwrap().live_graphs, 0);
}

#[test]
fn host_fn_is_refused_on_a_capturing_stream_and_the_capture_goes_on() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let capture = s.begin_capture().unwrap();
    let err = s.host_fn(|| {}).unwrap_err();
    assert!(matches!(err, qd::Error::InvalidOperation(_)), "{err}");
    assert!(err.message().contains("every replay"), "{err}");
    let graph = capture.end().unwrap();
    // SAFETY: an empty graph uses no memory.
    unsafe { graph.launch(&s).unwrap() };
    // Outside a capture host_fn works as ever.
    let (tx, rx) = std::sync::mpsc::channel();
    s.host_fn(move || tx.send(1).unwrap()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rx.recv().unwrap(), 1);
}

#[test]
fn dropping_the_capture_guard_ends_the_capture() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    {
        let _capture = s.begin_capture().unwrap();
        assert!(matches!(s.synchronize(), Err(qd::Error::InvalidOperation(_))));
    }
    s.synchronize().unwrap();
    assert_eq!(ctx.stats().unwrap().live_graphs, 0);
}

#[test]
fn a_capture_with_a_fork_not_joined_back_stays_open_until_it_is() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let capture = s.begin_capture().unwrap();
    let kids = s.fork(2).unwrap();
    let err = capture.end().unwrap_err();
    assert!(matches!(err, qd::Error::InvalidOperation(_)), "{err}");
    assert!(err.message().contains(&format!("{:016x}", kids[0].raw())), "{err}");
    s.join(kids).unwrap();
    let graph = s.end_capture().unwrap();
    // SAFETY: the graph uses no memory.
    unsafe { graph.launch(&s).unwrap() };
    s.synchronize().unwrap();
}
