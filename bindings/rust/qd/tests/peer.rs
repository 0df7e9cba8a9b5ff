//! Several contexts of one backend (qd.h, "Several devices"): waits across contexts, peer access
//! and peer copies, between two CPU contexts.

mod common;

use common::*;
use qd::{DeviceBuffer, Error, Event, LaunchConfig, Stream};

const ONE: LaunchConfig = LaunchConfig::new();

#[test]
fn a_stream_waits_for_an_event_of_another_context_before_consuming_its_data() {
    let (a, b) = (cpu(), cpu());
    let m = load(&a);
    let k = Kernels::new(&m);
    let (producer, consumer) = (Stream::new(&a).unwrap(), Stream::new(&b).unwrap());
    for trial in 0..10u32 {
        let src = DeviceBuffer::<u32>::alloc(&producer, 1).unwrap();
        let dst = DeviceBuffer::<u32>::alloc(&consumer, 1).unwrap();
        // SAFETY: spin_write(u64 dst, u32 value, u64 us) on a live one-element buffer; all work
        // is synchronised before it drops.
        unsafe { producer.launch(&k.spin_write, &ONE, (&src, 7 + trial, 2000u64)).unwrap() };
        let ready = Event::new(&a).unwrap();
        ready.record(&producer).unwrap();
        consumer.wait_event(&ready).unwrap(); // an event of the other context
        consumer.copy_peer(&dst, &src).unwrap();
        let mut out = [0u32];
        consumer.copy_to_slice(&mut out, &dst).unwrap();
        assert_eq!(out[0], 7 + trial, "the copy ran before the other context's write");
    }
}

#[test]
fn peer_access_between_cpu_contexts_is_possible_and_granting_it_twice_is_a_no_op() {
    let (a, b) = (cpu(), cpu());
    assert!(a.can_access_peer(&b).unwrap());
    a.enable_peer_access(&b).unwrap();
    a.enable_peer_access(&b).unwrap();
    assert!(matches!(a.can_access_peer(&a), Err(Error::InvalidArgument(_))));
}

#[test]
fn a_peer_copy_on_a_stream_of_a_third_context_is_wrong_context() {
    let (a, b, c) = (cpu(), cpu(), cpu());
    let src = DeviceBuffer::<u8>::alloc(&a.default_stream(), 64).unwrap();
    let dst = DeviceBuffer::<u8>::alloc(&b.default_stream(), 64).unwrap();
    let third = Stream::new(&c).unwrap();
    assert!(matches!(third.copy_peer(&dst, &src), Err(Error::WrongContext(_))));
    let short = DeviceBuffer::<u8>::alloc(&b.default_stream(), 32).unwrap();
    assert!(matches!(a.default_stream().copy_peer(&short, &src), Err(Error::InvalidArgument(_))));
}
