"""A stream's state read back (``Stream.is_capturing``, ``Stream.flags``/``non_blocking``) and
host callbacks that learn the stream's status (``qd.launch_host_fn(..., with_status=True)``,
``qd_launch_host_status_fn``)."""

from __future__ import annotations

import pytest

import qd
from qd import _callbacks


def test_is_capturing_inside_a_capture_and_on_a_forked_child_false_after(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    assert s.is_capturing is False
    with s.capture() as graph:
        assert s.is_capturing is True
        kids = s.fork(2)
        assert [k.is_capturing for k in kids] == [True, True]
        s.join(kids)
        assert s.is_capturing is True
    assert s.is_capturing is False
    graph.launch(stream=s)
    s.synchronize()
    s.close()


def test_flags_round_trip(ctx: qd.Context) -> None:
    plain = ctx.create_stream()
    nb = ctx.create_stream(non_blocking=True)
    assert plain.flags == 0 and plain.non_blocking is False
    assert nb.flags == qd._api.QD_STREAM_NON_BLOCKING and nb.non_blocking is True
    assert ctx.default_stream.non_blocking is True
    plain.close()
    nb.close()
    with pytest.raises(qd.ObjectClosedError):
        plain.flags
    with pytest.raises(qd.ObjectClosedError):
        plain.is_capturing


def test_host_fn_with_status_gets_the_stream_and_success(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    seen = []
    qd.launch_host_fn(lambda st, status: seen.append((st, status)), stream=s, with_status=True)
    s.synchronize()
    assert seen == [(s, qd.Status.SUCCESS)]
    assert not any(len(v) == 3 and v[2] is s for v in _callbacks._pending.values())
    s.close()


def test_host_fn_with_status_queued_before_a_loss_gets_device_lost(kernels, ctx: qd.Context) -> None:
    # The gate: a callback that holds the stream until the fault on another stream was seen.
    import threading

    s = ctx.create_stream()
    t = ctx.create_stream()
    entered, release = threading.Event(), threading.Event()

    def gate() -> None:
        entered.set()
        release.wait(20)

    qd.launch_host_fn(gate, stream=s)
    assert entered.wait(20)
    seen = []
    qd.launch_host_fn(lambda st, status: seen.append(status), stream=s, with_status=True)
    kernels.fault.launch(stream=t)
    with pytest.raises(qd.DeviceLostError):
        t.synchronize()
    release.set()
    with pytest.raises(qd.DeviceLostError):
        s.synchronize()
    ctx.close()  # called by the destroy at the latest
    assert seen == [qd.Status.ERROR_DEVICE_LOST]


def test_host_fn_with_status_is_refused_in_a_capture_and_never_called(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    seen = []
    pending = len(_callbacks._pending)
    with s.capture() as graph:
        with pytest.raises(qd.InvalidOperationError):
            qd.launch_host_fn(lambda st, status: seen.append(status), stream=s, with_status=True)
    assert len(_callbacks._pending) == pending  # not kept
    graph.launch(stream=s)
    s.synchronize()
    assert seen == []
    s.close()


def test_host_fn_with_status_exception_is_reported_by_synchronize(ctx: qd.Context) -> None:
    s = ctx.create_stream()

    def boom(st, status) -> None:
        raise KeyError(status)

    qd.launch_host_fn(boom, stream=s, with_status=True)
    with pytest.raises(qd.CallbackError):
        s.synchronize()
    s.close()
