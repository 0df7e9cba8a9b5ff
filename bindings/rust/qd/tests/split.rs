//! SM partitions (qd.h, "SM partitions"): `Context::split` on the CPU backend, where a context's
//! worker threads play the SM count (what CI can check without a GPU).

use std::collections::HashSet;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::ThreadId;

use qd::{Backend, Context, Error, Event, Stream};

fn four_workers() -> Context {
    Context::builder().backend(Backend::Cpu).cpu_worker_threads(4).build().expect("CPU context")
}

#[test]
fn split_gives_contexts_over_disjoint_worker_threads() {
    let ctx = four_workers();
    let parts = ctx.split(&[2, 2]).unwrap();
    assert_eq!(parts.len(), 2);
    assert_ne!(parts[0].raw(), parts[1].raw());
    let seen: Vec<Arc<Mutex<HashSet<ThreadId>>>> = (0..2).map(|_| Arc::default()).collect();
    for (part, set) in parts.iter().zip(&seen) {
        let streams: Vec<Stream<'_>> = (0..3).map(|_| Stream::new(part).unwrap()).collect();
        for _ in 0..10 {
            for s in &streams {
                let set = Arc::clone(set);
                s.host_fn(move || {
                    set.lock().unwrap().insert(std::thread::current().id());
                })
                .unwrap();
            }
        }
        part.synchronize().unwrap();
    }
    let (a, b) = (seen[0].lock().unwrap(), seen[1].lock().unwrap());
    assert!(!a.is_empty() && !b.is_empty());
    assert!(a.is_disjoint(&b), "a worker thread served two parts");
}

#[test]
fn work_of_two_parts_is_ordered_by_a_cross_context_wait() {
    let ctx = four_workers();
    let parts = ctx.split(&[2, 2]).unwrap();
    let (sa, sb) = (Stream::new(&parts[0]).unwrap(), Stream::new(&parts[1]).unwrap());
    let (open, gate) = mpsc::channel::<()>();
    let order = Arc::new(Mutex::new(Vec::new()));
    sa.host_fn(move || {
        let _ = gate.recv();
    })
    .unwrap();
    let o = Arc::clone(&order);
    sa.host_fn(move || o.lock().unwrap().push('a')).unwrap();
    let done = Event::new(&parts[0]).unwrap();
    done.record(&sa).unwrap();
    sb.wait_event(&done).unwrap(); // an event of the other part
    let o = Arc::clone(&order);
    sb.host_fn(move || o.lock().unwrap().push('b')).unwrap();
    assert!(!sb.query().unwrap(), "part 1 ran before part 0's gate opened");
    open.send(()).unwrap();
    sb.synchronize().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!['a', 'b']);
}

#[test]
fn the_parent_may_be_dropped_first() {
    let parent = four_workers();
    let mut parts = parent.split(&[1]).unwrap();
    drop(parent);
    let part = parts.pop().unwrap();
    let s = Stream::new(&part).unwrap();
    s.host_fn(|| {}).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn an_impossible_split_is_refused_and_makes_nothing() {
    let ctx = four_workers();
    match ctx.split(&[1, 4]) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("add up to 5 workers"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(matches!(ctx.split(&[1, 0]), Err(Error::InvalidArgument(_))));
    assert!(matches!(ctx.split(&[]), Err(Error::InvalidArgument(_))));
    let whole = ctx.split(&[4]).unwrap(); // the context is as it was
    assert!(matches!(whole[0].split(&[1]), Err(Error::InvalidOperation(_))));
}

#[test]
fn device_info_reports_the_split_rule() {
    let info = qd::device_info(Backend::Cpu, 0).unwrap();
    assert_eq!((info.split_granularity, info.split_minimum), (1, 1));
}
