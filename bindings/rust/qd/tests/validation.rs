//! The validation mode through the safe crate (qd.h, "Validation"): `validate_fail` refuses a
//! call that would race with `Error::Hazard`; an event orders it; `Stats::hazards_reported`
//! counts the reports.

use qd::{Backend, Context, DeviceBuffer, Error, Event, Stream};

#[test]
fn an_unordered_write_on_another_stream_is_refused_and_an_event_orders_it() {
    let ctx = Context::builder().backend(Backend::Cpu).validate_fail(true).build().unwrap();
    let a = Stream::new(&ctx).unwrap();
    let b = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&a, 16).unwrap();
    a.memset(&buf, 1).unwrap();
    // b is not ordered after a's allocation and memset: a hazard, refused.
    match b.memset(&buf, 2) {
        Err(Error::Hazard(m)) => assert!(m.contains("race: memset"), "{m}"),
        other => panic!("expected Error::Hazard, got {other:?}"),
    }
    assert_eq!(ctx.stats().unwrap().hazards_reported, 1);
    let e = Event::new(&ctx).unwrap();
    a.record(&e).unwrap();
    b.wait_event(&e).unwrap();
    b.memset(&buf, 2).unwrap();
    b.synchronize().unwrap();
    assert_eq!(ctx.stats().unwrap().hazards_reported, 1);
    buf.free(&b).unwrap();
}

#[test]
fn validation_is_off_by_default() {
    let ctx = Context::builder().backend(Backend::Cpu).build().unwrap();
    let a = Stream::new(&ctx).unwrap();
    let b = Stream::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::alloc(&a, 16).unwrap();
    a.synchronize().unwrap();
    b.memset(&buf, 2).unwrap();
    b.synchronize().unwrap();
    assert_eq!(ctx.stats().unwrap().hazards_reported, 0);
    buf.free(&b).unwrap();
}
