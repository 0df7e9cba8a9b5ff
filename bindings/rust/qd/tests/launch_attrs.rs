//! Launch attributes through the safe API (qd.h, "Launch attributes"), on the CPU backend:
//! the builder's fields reach qd_launch_ex and qd_task's attrs with their CPU meanings, and a
//! refusal names the attribute. No test sleeps.

mod common;

use common::*;
use qd::{Error, Event, HostKernel, HostTask, LaunchAttrs, LaunchConfig, Stream};
use std::sync::{Arc, Mutex};

#[test]
fn attributes_run_with_their_cpu_meanings() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let done = Event::new(&ctx).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (d, log) = (done.raw(), seen.clone());
    let k = HostKernel::new(&ctx, "k", move |b, _| {
        // SAFETY: a plain handle call; the event outlives the launch (synchronized below).
        let ready = unsafe { qd_sys::qd_event_query(d) } == qd_sys::QD_SUCCESS;
        log.lock().unwrap().push((b.block_idx[0], ready));
        Ok(())
    })
    .unwrap();
    let attrs = LaunchAttrs::new().cluster(2, 1, 1).programmatic(true).priority(-1).completion_event(&done);
    s.launch_host_with(&k, &LaunchConfig::new().grid(4, 1, 1), &attrs, ()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(0, false), (1, false), (2, false), (3, true)]);
    assert!(done.query().unwrap());
}

#[test]
fn refusals_name_the_attribute() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let k = HostKernel::new(&ctx, "k", |_, _| Ok(())).unwrap();
    let err = s
        .launch_host_with(&k, &LaunchConfig::new().grid(3, 1, 1), &LaunchAttrs::new().cluster(2, 1, 1), ())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("does not divide grid"), "{err}");
    let other = cpu();
    let foreign = Event::new(&other).unwrap();
    let err = s
        .launch_host_with(&k, &LaunchConfig::new(), &LaunchAttrs::new().completion_event(&foreign), ())
        .unwrap_err();
    assert!(matches!(err, Error::WrongContext(_)), "{err:?}");
    assert!(err.to_string().contains("attrs[0]"), "{err}");
}

#[test]
fn task_attributes_reach_launch_parallel() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let k = HostKernel::new(&ctx, "k", |_, _| Ok(())).unwrap();
    let bad = LaunchAttrs::new().cluster(2, 1, 1);
    let tasks = vec![HostTask::new(&k, 0, &LaunchConfig::new().grid(3, 1, 1), ()).attrs(&bad)];
    let err = s.launch_host_parallel(&tasks).unwrap_err();
    assert!(err.to_string().contains("tasks[0].attrs[0]"), "{err}");
    let good = LaunchAttrs::new().programmatic(true).priority(0);
    let tasks = vec![HostTask::new(&k, 0, &LaunchConfig::new().grid(4, 1, 1), ()).attrs(&good)];
    s.launch_host_parallel(&tasks).unwrap();
    s.synchronize().unwrap();
}
