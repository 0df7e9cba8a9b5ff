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
    s.memset(&dst, 0).unwrap(); // a new allocation holds whatever its memory held before
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

#[test]
fn a_rebound_kernel_node_changes_later_replays_and_refusals_change_nothing() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&s, 2).unwrap();
    s.memset(&out, 0).unwrap();
    let p = out.device_ptr();
    let c = s.begin_capture().unwrap();
    // SAFETY: write_value(u64 dst, u32 value) on the live two-element buffer, which outlives
    // every replay (all synchronised before it drops).
    unsafe { s.launch(&k.write_value, &ONE, (p, 1u32)).unwrap() };
    let graph = c.end().unwrap();
    assert_eq!(graph.kernel_node_count().unwrap(), 1);
    // SAFETY: the same buffer, its second element.
    unsafe { graph.set_kernel_args(0, &k.write_value, (qd::DevicePtr(p.0 + 4), 9u32)).unwrap() };
    // SAFETY: out is live.
    unsafe { graph.launch(&s).unwrap() };
    s.synchronize().unwrap();
    let mut host = [0u32; 2];
    s.copy_to_slice(&mut host, &out).unwrap();
    assert_eq!(host, [0, 9], "the replay did not run the rebound values");
    // SAFETY: refused before any value is used.
    unsafe {
        assert!(matches!(graph.set_kernel_args(1, &k.write_value, (p, 1u32)), Err(qd::Error::InvalidArgument(_))));
        assert!(matches!(graph.set_kernel_args(0, &k.write_value, (p,)), Err(qd::Error::InvalidArgument(_))));
        assert!(matches!(graph.set_kernel_args(0, &k.write_value, (p, 1u64)), Err(qd::Error::InvalidArgument(_))));
    }
}

#[test]
fn an_if_conditional_runs_its_body_only_when_its_word_is_not_zero() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&s, 2).unwrap(); // [0] the word, [1] the body's
    s.memset(&buf, 0).unwrap();
    let word = buf.device_ptr();
    let c = s.begin_capture().unwrap();
    s.begin_conditional(qd::ConditionalKind::If, word.0, 0).unwrap();
    assert!(matches!(s.conditional_handle(), Err(qd::Error::NotSupported(_))));
    assert!(matches!(s.next_branch(), Err(qd::Error::InvalidOperation(_))), "an IF has one body");
    // SAFETY: write_value on the live buffer's second element, which outlives the replays.
    unsafe { s.launch(&k.write_value, &ONE, (qd::DevicePtr(word.0 + 4), 7u32)).unwrap() };
    s.end_conditional().unwrap();
    let graph = c.end().unwrap();
    for (value, want) in [(0u32, 0u32), (1, 7)] {
        s.synchronize().unwrap();
        poke(word, value);
        // SAFETY: buf is live.
        unsafe { graph.launch(&s).unwrap() };
        s.synchronize().unwrap();
        assert_eq!(peek(qd::DevicePtr(word.0 + 4)), want, "word {value}");
    }
    // Misuse: not capturing; a bad kind is impossible by type, a SWITCH with no case is not.
    assert!(matches!(s.begin_conditional(qd::ConditionalKind::If, word.0, 0), Err(qd::Error::InvalidOperation(_))));
    assert!(matches!(s.end_conditional(), Err(qd::Error::InvalidOperation(_))));
    let c = s.begin_capture().unwrap();
    assert!(matches!(
        s.begin_conditional(qd::ConditionalKind::Switch, word.0, 0),
        Err(qd::Error::InvalidArgument(_))
    ));
    drop(c.end().unwrap());
}

#[test]
fn a_conditional_guard_and_the_closure_forms_decide_at_each_replay() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&s, 4).unwrap(); // [0] the word, [1..3] the bodies'
    s.memset(&buf, 0).unwrap();
    let word = buf.device_ptr();
    let slot = |i: u64| qd::DevicePtr(word.0 + 4 * i);
    let c = s.begin_capture().unwrap();
    {
        let mut branch = s.conditional(qd::ConditionalKind::IfElse, word.0, 0).unwrap();
        // SAFETY: write_value into the live buffer, which outlives the replays.
        unsafe { s.launch(&k.write_value, &ONE, (slot(1), 11u32)).unwrap() };
        branch.next_branch().unwrap();
        assert!(matches!(branch.next_branch(), Err(qd::Error::InvalidOperation(_))), "two bodies");
        // SAFETY: as above.
        unsafe { s.launch(&k.write_value, &ONE, (slot(1), 21u32)).unwrap() };
        branch.end().unwrap();
    }
    // SAFETY (both closures): as above.
    s.if_then(word.0, |s| unsafe { s.launch(&k.write_value, &ONE, (slot(2), 12u32)) }).unwrap();
    s.if_else(
        word.0,
        |s| unsafe { s.launch(&k.write_value, &ONE, (slot(3), 13u32)) },
        |s| unsafe { s.launch(&k.write_value, &ONE, (slot(3), 23u32)) },
    )
    .unwrap();
    let graph = c.end().unwrap();
    for (value, want) in [(0u32, [21u32, 0, 23]), (1, [11, 12, 13])] {
        s.synchronize().unwrap();
        for i in 1..4 {
            poke(slot(i), 0);
        }
        poke(word, value);
        // SAFETY: buf is live.
        unsafe { graph.launch(&s).unwrap() };
        s.synchronize().unwrap();
        assert_eq!([peek(slot(1)), peek(slot(2)), peek(slot(3))], want, "word {value}");
    }
}

#[test]
fn a_while_loop_runs_until_its_body_zeroes_the_word() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&s, 2).unwrap(); // [0] the word, [1] the count
    s.memset(&buf, 0).unwrap();
    let word = buf.device_ptr();
    let count = qd::DevicePtr(word.0 + 4);
    let c = s.begin_capture().unwrap();
    s.while_loop(word.0, |s| {
        // SAFETY: add_value on the live buffer's elements: count += 1, word -= 1.
        unsafe {
            s.launch(&k.add_value, &ONE, (count, count, 1u32))?;
            s.launch(&k.add_value, &ONE, (word, word, u32::MAX))
        }
    })
    .unwrap();
    let graph = c.end().unwrap();
    s.synchronize().unwrap();
    poke(word, 5);
    // SAFETY: buf is live.
    unsafe { graph.launch(&s).unwrap() };
    s.synchronize().unwrap();
    assert_eq!((peek(word), peek(count)), (0, 5));
}

#[test]
fn a_failing_body_or_a_dropped_guard_leaves_no_conditional_open() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    let word = buf.device_ptr();
    let c = s.begin_capture().unwrap();
    let failed = s.while_loop(word.0, |_| Err(qd::Error::InvalidArgument("the body's own".into())));
    assert!(matches!(failed, Err(qd::Error::InvalidArgument(m)) if m == "the body's own"));
    drop(s.conditional(qd::ConditionalKind::If, word.0, 0).unwrap());
    assert!(matches!(s.end_conditional(), Err(qd::Error::InvalidOperation(_))), "none open");
    assert!(ctx.take_drop_errors().is_empty());
    drop(c.end().unwrap());
}

#[test]
fn a_buffer_allocated_and_dropped_inside_a_capture_is_the_graphs_block() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    s.memset(&out, 0).unwrap();
    let c = s.begin_capture().unwrap();
    {
        let tmp = DeviceBuffer::<u32>::alloc(&s, 1).unwrap(); // a block of the graph
        // SAFETY: write_value into tmp, then add_value(out, tmp, 1): both live here.
        unsafe {
            s.launch(&k.write_value, &ONE, (tmp.device_ptr(), 7u32)).unwrap();
            s.launch(&k.add_value, &ONE, (&out, &tmp, 1u32)).unwrap();
        }
    } // dropped: freed inside the capture, as the graph's own block must be
    let graph = c.end().expect("the block was freed inside its capture");
    for _ in 0..3 {
        // SAFETY: out is live; the graph allocates and frees its own block.
        unsafe { graph.launch(&s).unwrap() };
    }
    let mut back = [0u32];
    s.copy_to_slice(&mut back, &out).unwrap();
    assert_eq!(back, [8]);
    assert!(ctx.take_drop_errors().is_empty(), "{:?}", ctx.take_drop_errors());
}
