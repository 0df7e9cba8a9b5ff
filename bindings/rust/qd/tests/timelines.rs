//! Timelines (`qd::Timeline`, `Stream::signal`, `Stream::wait_value`) on the CPU backend: a wait
//! queued before its signal holds its stream, values only grow, the host side, and the stats.
//! Every test waits on conditions (synchronize, host waits); a zero timeout only says "not yet".

mod common;

use common::*;
use qd::{Error, Stream, Timeline};
use std::time::Duration;

#[test]
fn wait_queued_before_its_signal_holds_the_stream_until_the_host_signals() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let tl = Timeline::new(&ctx, 0).unwrap();
    s.wait_value(&tl, 2).unwrap();
    assert!(!s.query().unwrap(), "the stream ran past a wait nothing signalled");
    assert!(!tl.wait(2, Some(Duration::ZERO)).unwrap());
    tl.signal(1).unwrap();
    assert!(!s.query().unwrap(), "1 does not reach 2");
    tl.signal(2).unwrap();
    s.synchronize().unwrap();
    assert!(tl.wait(2, Some(Duration::ZERO)).unwrap());
}

#[test]
fn a_signal_on_one_stream_releases_the_wait_of_another() {
    let ctx = cpu();
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let tl = Timeline::new(&ctx, 0).unwrap();
    b.wait_value(&tl, 1).unwrap();
    a.signal(&tl, 1).unwrap();
    assert!(tl.wait(1, None).unwrap());
    b.synchronize().unwrap();
    assert_eq!(tl.value().unwrap(), 1);
}

#[test]
fn values_only_grow_and_a_refused_signal_changes_nothing() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let tl = Timeline::new(&ctx, 4).unwrap();
    assert!(matches!(s.signal(&tl, 4), Err(Error::InvalidArgument(_))));
    assert!(matches!(tl.signal(2), Err(Error::InvalidArgument(_))));
    assert_eq!(tl.value().unwrap(), 4);
    tl.signal(5).unwrap();
    assert_eq!(tl.value().unwrap(), 5);
}

#[test]
fn counted_in_the_stats_until_closed() {
    let ctx = cpu();
    let before = ctx.stats().unwrap().live_timelines;
    let tl = Timeline::new(&ctx, 0).unwrap();
    assert_eq!(ctx.stats().unwrap().live_timelines, before + 1);
    tl.close().unwrap();
    assert_eq!(ctx.stats().unwrap().live_timelines, before);
}

#[test]
fn a_timeline_of_another_context_is_wrong_context() {
    let (ctx, other) = (cpu(), cpu());
    let s = Stream::new(&ctx).unwrap();
    let tl = Timeline::new(&other, 0).unwrap();
    assert!(matches!(s.signal(&tl, 1), Err(Error::WrongContext(_))));
    assert!(matches!(s.wait_value(&tl, 1), Err(Error::WrongContext(_))));
}
