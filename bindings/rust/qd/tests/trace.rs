//! The timeline trace from Rust (qd.h, "Timeline trace"): the guard of `Context::trace` stops
//! the trace and writes the file when dropped, and the file holds exactly the guard's work
//! (memsets of distinct sizes before, inside and after tell them apart); `flush`; misuse gives
//! the C status.

mod common;

use common::*;
use qd::{DeviceBuffer, Error, Stream};
use std::path::PathBuf;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("qd-rust-trace-{}-{}", std::process::id(), name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The byte counts of the memset slices in a trace file, sorted.
fn memsets(path: &PathBuf) -> Vec<u64> {
    let text = std::fs::read_to_string(path).unwrap();
    let key = "\"cat\":\"memset\",\"args\":{\"origin\":\"api\",\"bytes\":";
    let mut out: Vec<u64> = text
        .match_indices(key)
        .map(|(at, _)| {
            let rest = &text[at + key.len()..];
            rest[..rest.find('}').unwrap()].parse().unwrap()
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn the_guard_traces_exactly_its_scope_and_writes_on_drop() {
    let dir = temp_dir("scope");
    let path = dir.join("t.json");
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u8>::alloc(&s, 64).unwrap();
    s.memset_bytes(&buf, 0, 11, 1).unwrap();
    {
        let trace = ctx.trace(&path).unwrap();
        s.memset_bytes(&buf, 0, 22, 1).unwrap();
        trace.flush().unwrap();
        assert_eq!(memsets(&path), vec![22]);
        s.memset_bytes(&buf, 0, 23, 1).unwrap();
    }
    s.memset_bytes(&buf, 0, 33, 1).unwrap();
    s.synchronize().unwrap();
    assert_eq!(memsets(&path), vec![22, 23]);
    drop(buf);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stop_reports_and_misuse_gives_the_c_status() {
    let dir = temp_dir("misuse");
    let ctx = cpu();
    assert!(matches!(ctx.stop_trace(), Err(Error::InvalidOperation(_))));
    assert!(matches!(ctx.flush_trace(), Err(Error::InvalidOperation(_))));
    assert!(matches!(ctx.trace(dir.join("missing").join("t.json")), Err(Error::InvalidArgument(_))));
    assert!(matches!(ctx.trace(&dir), Err(Error::InvalidArgument(_))));
    let trace = ctx.trace(dir.join("t.json")).unwrap();
    assert!(matches!(ctx.trace(dir.join("u.json")), Err(Error::InvalidOperation(_))));
    trace.stop().unwrap();
    assert!(matches!(ctx.stop_trace(), Err(Error::InvalidOperation(_))));
    ctx.start_trace(dir.join("t.json")).unwrap();
    ctx.stop_trace().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
