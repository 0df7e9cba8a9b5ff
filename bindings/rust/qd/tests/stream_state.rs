//! A stream's state read back (`Stream::is_capturing`, `Stream::flags`) and host callbacks that
//! learn the stream's status (`Stream::host_fn_with_status`, `qd_launch_host_status_fn`), on the
//! CPU backend. Every test waits on conditions (channels, synchronize); none sleeps.

mod common;

use common::*;
use qd::{Error, HostKernel, KernelFault, LaunchConfig, Stream, StreamOptions};
use std::sync::mpsc;

#[test]
fn is_capturing_inside_a_capture_and_on_a_forked_child_false_after_it_ends() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    assert!(!s.is_capturing().unwrap());
    let capture = s.begin_capture().unwrap();
    assert!(s.is_capturing().unwrap());
    let kids = s.fork(2).unwrap();
    for k in &kids {
        assert!(k.is_capturing().unwrap(), "a forked child joined the capture");
    }
    s.join(kids).unwrap();
    let graph = capture.end().unwrap();
    assert!(!s.is_capturing().unwrap());
    // SAFETY: the graph uses no buffer.
    unsafe { graph.launch(&s).unwrap() };
    s.synchronize().unwrap();
}

#[test]
fn flags_round_trip_the_creation_options() {
    let ctx = cpu();
    let plain = Stream::new(&ctx).unwrap();
    let nb = Stream::with_options(&ctx, StreamOptions { non_blocking: true, ..Default::default() }).unwrap();
    assert_eq!(plain.flags().unwrap(), 0);
    assert!(!plain.is_non_blocking().unwrap());
    assert_eq!(nb.flags().unwrap(), qd::sys::QD_STREAM_NON_BLOCKING);
    assert!(nb.is_non_blocking().unwrap());
    assert!(ctx.default_stream().is_non_blocking().unwrap());
}

#[test]
fn host_fn_with_status_runs_in_order_with_ok() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let (tx, rx) = mpsc::channel();
    let first = tx.clone();
    s.host_fn(move || first.send("plain").unwrap()).unwrap();
    s.host_fn_with_status(move |status| tx.send(if status.is_ok() { "ok" } else { "err" }).unwrap()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["plain", "ok"]);
}

#[test]
fn host_fn_with_status_queued_before_a_loss_gets_device_lost() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let t = Stream::new(&ctx).unwrap();
    let fault = HostKernel::new(&ctx, "status test fault", |_, _| Err(KernelFault)).unwrap();
    // A gate: holds `s` until the fault on `t` was seen.
    let (entered_tx, entered_rx) = mpsc::channel();
    let (open_tx, open_rx) = mpsc::channel::<()>();
    s.host_fn(move || {
        entered_tx.send(()).unwrap();
        let _ = open_rx.recv();
    })
    .unwrap();
    entered_rx.recv().unwrap();
    let (tx, rx) = mpsc::channel();
    s.host_fn_with_status(move |status| tx.send(status).unwrap()).unwrap();
    t.launch_host(&fault, &LaunchConfig::new(), ()).unwrap();
    assert!(matches!(t.synchronize(), Err(Error::DeviceLost(_))));
    open_tx.send(()).unwrap();
    assert!(matches!(s.synchronize(), Err(Error::DeviceLost(_))));
    drop((s, t, fault));
    drop(ctx); // called by the destroy at the latest
    let statuses: Vec<_> = rx.try_iter().collect();
    assert_eq!(statuses.len(), 1, "called exactly once");
    assert!(matches!(statuses[0], Err(Error::DeviceLost(_))), "{:?}", statuses[0]);
}

#[test]
fn host_fn_with_status_is_refused_in_a_capture_and_never_called() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let capture = s.begin_capture().unwrap();
    let err = s.host_fn_with_status(move |_| tx.send(()).unwrap()).unwrap_err();
    assert!(matches!(err, Error::InvalidOperation(_)), "{err}");
    let graph = capture.end().unwrap();
    // SAFETY: the graph uses no buffer.
    unsafe { graph.launch(&s).unwrap() };
    s.synchronize().unwrap();
    assert!(rx.try_recv().is_err(), "a refused call's closure was called");
}

#[test]
fn a_panic_in_host_fn_with_status_is_caught() {
    let ctx = cpu();
    let s = Stream::new(&ctx).unwrap();
    s.host_fn_with_status(|_| panic!("inside a host callback")).unwrap();
    // Caught in the trampoline; on the CPU backend it faults the context, as host_fn's does.
    assert!(matches!(s.synchronize(), Err(Error::DeviceLost(_))));
}
