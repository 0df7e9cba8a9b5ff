"""The binding's fast paths stay fast under ordinary use (README, "Performance notes"): a kernel
launched with a few argument signatures in turn keeps a launch function for each, and
``Stream.record()`` reuses pooled events. Asserted on what the binding does (which path ran,
which qd handle came back), never on time."""

from __future__ import annotations

import gc
from ctypes import c_float, c_uint32
from typing import Any, List

import pytest

import qd
from qd import _kernel


def test_alternating_argument_signatures_stay_on_the_fast_path(
        ctx: qd.Context, kernels: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    k = kernels.noop
    signatures = [(buf, c_uint32(4)), (buf, c_float(1.0)), (buf, 7, 2.5)]
    for args in signatures:  # each signature's launch function is made once
        k.launch(*args, stream=s)
    slow: List[str] = []
    layout_get = _kernel._Layout.get
    general = _kernel.Kernel._launch_general

    def counting_get(types: Any) -> Any:
        slow.append("layout")
        return layout_get(types)

    def counting_general(self: Any, *a: Any) -> Any:
        slow.append("general")
        return general(self, *a)

    monkeypatch.setattr(_kernel._Layout, "get", staticmethod(counting_get))
    monkeypatch.setattr(_kernel.Kernel, "_launch_general", counting_general)
    for i in range(60):
        k.launch(*signatures[i % 2], stream=s)  # two in turn
    for i in range(60):
        k.launch(*signatures[i % 3], stream=s)  # three in turn
    s.synchronize()
    assert slow == [], f"{len(slow)} of 120 launches left the fast path"


def test_alternating_signatures_still_check_every_argument(ctx: qd.Context,
                                                           kernels: Any) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    k = kernels.noop
    k.launch(buf, c_uint32(4), stream=s)
    k.launch(buf, c_float(1.0), stream=s)
    k.launch(buf, c_uint32(4), stream=s)
    qd.free(buf, stream=s)
    with pytest.raises(qd.InvalidAddressError):
        k.launch(buf, c_float(1.0), stream=s)  # a freed buffer, in a remembered signature
    with pytest.raises(qd.ArgumentRangeError):
        k.launch(2**64, c_uint32(1), stream=s)
    s.synchronize()


def test_record_reuses_the_events_it_made(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    ev = s.record()
    first = ev.handle
    del ev
    gc.collect()
    again = s.record()
    assert again.handle == first, "record() made a new event instead of reusing its last one"
    again.synchronize()
    assert again.query()
    again.close()
    assert again.closed and again.handle == 0
    assert s.record().handle == first  # close() gave it back too
    timing = s.record(timing=True)  # timing events have a pool of their own
    assert timing.timing and timing.handle != first
    end = s.record(timing=True)
    end.synchronize()
    assert end - timing >= 0.0
    made = ctx.create_event()  # an event the caller made is destroyed by close(), as before
    made_handle = made.handle
    made.close()
    assert s.record().handle != made_handle


def test_record_pool_is_bounded_and_events_still_order_work(ctx: qd.Context) -> None:
    a, b = ctx.create_stream(), ctx.create_stream()
    held = [a.record() for _ in range(200)]
    before = ctx.stats().live_events
    del held
    gc.collect()
    assert ctx.stats().live_events <= before - 200 + 64  # at most 64 kept for reuse
    ran: List[int] = []
    import threading

    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(20), stream=a)
    qd.launch_host_fn(lambda: ran.append(1), stream=a)
    ev = a.record()
    b.wait(ev)
    qd.launch_host_fn(lambda: ran.append(2), stream=b)
    del ev  # back to the pool while a wait on it is queued: the wait keeps its record
    gc.collect()
    c = ctx.create_stream()
    c.record()  # reuses it on another stream
    gate.set()
    b.synchronize()
    assert ran == [1, 2]
