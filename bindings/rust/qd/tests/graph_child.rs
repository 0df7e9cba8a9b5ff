//! Child graphs (qd.h, "Graphs", "Child graphs"): a graph launched on a capturing stream is
//! recorded into that capture; the new graph replays it, also after the child was dropped.

mod common;

use common::*;
use qd::{DeviceBuffer, LaunchConfig, Stream};

const ONE: LaunchConfig = LaunchConfig::new();

#[test]
fn a_graph_launched_on_a_capturing_stream_is_recorded_into_the_capture() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let src = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    let mid = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&s, 1).unwrap();
    s.copy_from_slice(&src, &[5]).unwrap();
    let child = {
        let c = s.begin_capture().unwrap();
        let kids = s.fork(1).unwrap();
        // SAFETY: add_value(u64 dst, u64 src, u32 add) on live one-element buffers, which
        // outlive every replay (all synchronised before they drop).
        unsafe { kids[0].launch(&k.add_value, &ONE, (&mid, &src, 1u32)).unwrap() };
        s.join(kids).unwrap();
        c.end().unwrap()
    };
    let parent = {
        let c = s.begin_capture().unwrap();
        // SAFETY: as above; on a capturing stream the child is recorded, not run.
        unsafe { child.launch(&s).unwrap() };
        unsafe { s.launch(&k.add_value, &ONE, (&out, &mid, 10u32)).unwrap() };
        c.end().unwrap()
    };
    drop(child); // the parent copied the child's operations
    let mut v = [0u32; 1];
    for _ in 0..3 {
        s.memset(&mid, 0).unwrap();
        s.memset(&out, 0).unwrap();
        // SAFETY: as above.
        unsafe { parent.launch(&s).unwrap() };
        s.copy_to_slice(&mut v, &out).unwrap();
        assert_eq!(v, [16], "the child's work or the work after it is missing");
    }
    drop(parent);
    assert_eq!(ctx.stats().unwrap().live_graphs, 0);
    assert_eq!(ctx.stats().unwrap().stream_pool_leased, 0);
}
