//! A graph's DOT and its upload through the safe API, on the CPU backend: `Graph::debug_dot`
//! writes every recorded operation with the fork and join edges (verbose: argument sizes) and
//! refuses a bad path; `Graph::upload` then `Graph::launch` gives the launch's results, and an
//! upload on a capturing stream is refused while the capture goes on.

mod common;

use common::*;
use qd::{DeviceBuffer, LaunchConfig, Stream};

const ONE: LaunchConfig = LaunchConfig::new();

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[test]
fn debug_dot_writes_each_operation_and_the_fork_and_join_edges() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&s, 2).unwrap();
    let p = out.device_ptr();
    let c = s.begin_capture().unwrap();
    let kids = s.fork(2).unwrap();
    for (i, kid) in kids.iter().enumerate() {
        // SAFETY: write_value(u64 dst, u32 value) into the live buffer; the graph is never
        // launched.
        unsafe { kid.launch(&k.write_value, &ONE, (qd::DevicePtr(p.0 + 4 * i as u64), 1u32)).unwrap() };
    }
    s.join(kids).unwrap();
    let graph = c.end().unwrap();
    let dir = std::env::temp_dir().join(format!("qd-rust-dot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("g.dot");
    graph.debug_dot(&path, false).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("digraph qd_graph {"), "{text}");
    // The fork's record and 2 waits, 2 launches, the join's 2 records and 2 waits.
    let nodes = text.lines().filter(|l| l.trim_start().starts_with('n') && l.contains(" [label=")).count();
    assert_eq!(nodes, 1 + 2 + 2 + 2 + 2, "{text}");
    assert_eq!(count(&text, "qd_test_write_value\\ngrid (1,1,1) block (1,1,1)"), 2, "{text}");
    assert_eq!(count(&text, "label=\"fork\""), 2, "{text}");
    assert_eq!(count(&text, "label=\"join\""), 2, "{text}");
    assert_eq!(count(&text, "args"), 0, "{text}");
    graph.debug_dot(&path, true).unwrap();
    assert_eq!(count(&std::fs::read_to_string(&path).unwrap(), "args 8, 4 B"), 2);
    assert!(matches!(graph.debug_dot(&dir, false), Err(qd::Error::InvalidArgument(_))));
    assert!(matches!(graph.debug_dot("", false), Err(qd::Error::InvalidArgument(_))));
    assert!(matches!(graph.debug_dot(dir.join("no/such/g.dot"), false), Err(qd::Error::InvalidArgument(_))));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn upload_then_launch_gives_the_launch_results_and_a_capturing_stream_refuses_it() {
    let ctx = cpu();
    let m = load(&ctx);
    let k = Kernels::new(&m);
    let s = Stream::new(&ctx).unwrap();
    let out = DeviceBuffer::<u32>::alloc(&s, 2).unwrap();
    s.memset(&out, 0).unwrap();
    let p = out.device_ptr();
    let c = s.begin_capture().unwrap();
    let kids = s.fork(2).unwrap();
    for (i, kid) in kids.iter().enumerate() {
        // SAFETY: write_value into the live buffer, which outlives every replay (synchronised
        // before it drops).
        unsafe { kid.launch(&k.write_value, &ONE, (qd::DevicePtr(p.0 + 4 * i as u64), 7 + i as u32)).unwrap() };
    }
    s.join(kids).unwrap();
    let graph = c.end().unwrap();
    graph.upload(&s).unwrap();
    graph.upload(&s).unwrap();
    let other = Stream::new(&ctx).unwrap();
    // SAFETY: out is live.
    unsafe { graph.launch(&other).unwrap() };
    let mut host = [0u32; 2];
    other.copy_to_slice(&mut host, &out).unwrap();
    assert_eq!(host, [7, 8]);

    let capturing = Stream::new(&ctx).unwrap();
    let capture = capturing.begin_capture().unwrap();
    let err = graph.upload(&capturing).unwrap_err();
    assert!(matches!(err, qd::Error::InvalidOperation(_)), "{err}");
    // SAFETY: noop() takes no argument.
    unsafe { capturing.launch(&k.noop, &ONE, ()).unwrap() };
    let captured = capture.end().unwrap();
    assert_eq!(captured.kernel_node_count().unwrap(), 1);
}
