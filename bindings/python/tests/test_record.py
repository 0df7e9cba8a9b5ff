"""``Stream.record()``: a pooled event recorded on the stream (README, "Performance notes"). Every
test runs twice, through qd._speedups' compiled record and through the Python path, which must
behave alike: the same Event, the same pool, the same exception with the same message. (Without
qd._speedups the compiled runs skip; with it, both runs' Events have its compiled finalizer: the
Python one is Event.__del__ in the suite's run with QD_PYTHON_SPEEDUPS=0.) Asserted on what the
binding does, never on time."""

from __future__ import annotations

import gc
import threading
from typing import Any, Iterator, List

import pytest

import qd
from qd import _lib, _stream


@pytest.fixture(params=["compiled", "python"], autouse=True)
def record_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which Stream.record runs: qd._speedups' (skipped where it is not in use) or Python's."""
    if request.param == "compiled":
        if qd.Stream.record is _stream._py_record:
            pytest.skip(f"qd._speedups not in use: {_lib.why_not_speedups or 'no StreamBase'}")
    else:
        monkeypatch.setattr(qd.Stream, "record", _stream._py_record)
    return request.param


def _handle_of(c: Any) -> int:
    """The handle an Event's ``_c`` stands for: a c_uint64 (ctypes) or an int (cffi)."""
    return c if type(c) is int else c.value


@pytest.fixture
def pools(ctx: qd.Context) -> Any:
    """The context's pools of record events: (plain, timing)."""
    return ctx._record_events


def test_record_returns_a_pooled_event_with_every_field_set(ctx: qd.Context, stream: qd.Stream,
                                                            pools: Any) -> None:
    first = stream.record()  # the pool is empty: made with qd_event_create
    first.synchronize()
    h = first.handle
    first.close()
    assert len(pools[0]) == 1
    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(20), stream=stream)
    ev = stream.record()  # from the pool
    try:
        assert type(ev) is qd.Event and ev.handle == h and ev._key == h and ev._h == h
        assert _handle_of(ev._c) == h  # what the FFI in use passes for it
        assert ev.context is ctx and ev._ctx is ctx and ev._pooled is pools[0]
        assert ev.timing is False and not ev.closed and pools[0] == []
        assert ev.query() is False, "recorded behind the gate"
    finally:
        gate.set()
    ev.synchronize()
    assert ev.query() is True
    assert repr(ev) == f"<qd.Event {h:#x}>"


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


def test_record_with_an_empty_pool_creates_one_event(ctx: qd.Context, stream: qd.Stream,
                                                     pools: Any) -> None:
    live = ctx.stats().live_events
    held = [stream.record() for _ in range(3)]
    assert ctx.stats().live_events == live + 3 and pools[0] == []
    for ev in held:
        ev.close()
    assert len(pools[0]) == 3
    again = [stream.record() for _ in range(3)]  # all three from the pool
    assert ctx.stats().live_events == live + 3 and pools[0] == []
    assert {ev.handle for ev in again} == {ev._key for ev in held}
    stream.synchronize()


def test_events_go_back_to_their_pool_when_closed_or_collected(stream: qd.Stream,
                                                               pools: Any) -> None:
    plain, timing = stream.record(), stream.record(timing=True)
    ph, th = plain.handle, timing.handle
    plain.close()
    assert [h for h, _ in pools[0]] == [ph] and pools[1] == []
    assert plain.closed and plain.handle == 0
    plain.close()  # idempotent: not given back twice
    assert len(pools[0]) == 1
    del timing
    gc.collect()
    assert [h for h, _ in pools[1]] == [th]
    assert stream.record(timing=True).handle == th


def test_timing_takes_its_own_pool_and_any_truth_value(stream: qd.Stream, pools: Any) -> None:
    for value, kind in ((True, True), (False, False), (1, True), (0, False), ("yes", True),
                        ([], False)):
        ev = stream.record(timing=value)
        assert ev.timing is kind and ev._timing is kind, value
        assert ev._pooled is pools[kind]
        ev.close()
        assert len(pools[kind]) == 1 and len(pools[not kind]) <= 1
    start = stream.record(timing=1)
    end = stream.record(timing=True)
    end.synchronize()
    assert end - start >= 0.0


def test_timing_whose_truth_raises_raises_that_and_takes_nothing(ctx: qd.Context,
                                                                 stream: qd.Stream,
                                                                 pools: Any) -> None:
    stream.record().close()
    stream.record(timing=True).close()

    class Undecided:
        def __bool__(self) -> bool:
            raise ZeroDivisionError("no truth here")

    live = ctx.stats().live_events
    with pytest.raises(ZeroDivisionError, match="no truth here"):
        stream.record(timing=Undecided())
    assert len(pools[0]) == 1 and len(pools[1]) == 1 and ctx.stats().live_events == live


def test_record_on_a_closed_stream_names_it_and_takes_nothing(ctx: qd.Context,
                                                              pools: Any) -> None:
    owned = ctx.create_stream()
    owned.record().close()
    owned.close()
    lease = ctx.acquire_stream()
    lease.close()
    live = ctx.stats().live_events
    for s, word in ((owned, "closed"), (lease, "released")):
        for timing in (False, True):
            with pytest.raises(qd.ObjectClosedError) as info:
                s.record(timing=timing)
            assert info.value.message == f"this qd.Stream (handle {s._key:#x}) was {word}"
    assert len(pools[0]) == 1 and pools[1] == [] and ctx.stats().live_events == live


def test_record_on_a_stream_of_a_closed_context_names_the_context() -> None:
    ctx = qd.Context("cpu")
    s = ctx.create_stream()
    s.record().close()
    key = s._key
    ctx.close()
    assert ctx._record_events == ([], [])
    for timing in (False, True):
        with pytest.raises(qd.ObjectClosedError) as info:
            s.record(timing=timing)
        assert info.value.message == (
            f"this qd.Stream (handle {key:#x}) was closed with its qd.Context")
    assert ctx._record_events == ([], [])


def test_an_event_dropped_after_its_context_closed_is_not_given_back() -> None:
    ctx = qd.Context("cpu")
    s = ctx.create_stream()
    s.record().close()
    held, timing = s.record(), s.record(timing=True)
    ctx.close()
    assert ctx._record_events == ([], []), "close() empties the pools"
    held.close()
    del timing
    gc.collect()
    assert ctx._record_events == ([], []), "an event of a closed context went back"
    assert held.closed and held.handle == 0
    with pytest.raises(qd.ObjectClosedError):
        s.record()


def test_a_failing_record_raises_its_status_and_gives_the_event_back(
        ctx: qd.Context, stream: qd.Stream, kernels: Any, pools: Any) -> None:
    stream.record().close()
    stream.record(timing=True).close()
    kernels.fault.launch(stream=stream)
    with pytest.raises(qd.DeviceLostError):
        stream.synchronize()
    before = [list(pools[0]), list(pools[1])]
    for timing in (False, True):
        with pytest.raises(qd.DeviceLostError) as info:
            stream.record(timing=timing)  # an event from the pool, refused by qd_event_record
        assert info.value.status == qd.Status.ERROR_DEVICE_LOST
        assert "fault" in info.value.message
    assert [list(pools[0]), list(pools[1])] == before, "the refused events went back"


def test_record_pool_is_bounded_and_events_still_order_work(ctx: qd.Context) -> None:
    a, b = ctx.create_stream(), ctx.create_stream()
    held = [a.record() for _ in range(200)]
    before = ctx.stats().live_events
    del held
    gc.collect()
    assert ctx.stats().live_events <= before - 200 + 64  # at most 64 kept for reuse
    assert len(ctx._record_events[0]) == 64
    ran: List[int] = []
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


def test_an_event_record_returned_keeps_its_record_while_held(ctx: qd.Context) -> None:
    a, b = ctx.create_stream(), ctx.create_stream()
    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(20), stream=a)
    held = a.record()  # not complete until the gate opens
    timing = a.record(timing=True)
    handles = set()
    for _ in range(100):  # each of these goes back to the pool at once and is reused
        ev = b.record()
        handles.add(ev.handle)
        ev.synchronize()
        t = b.record(timing=True)
        handles.add(t.handle)
        t.close()
    gc.collect()
    assert held.handle not in handles and timing.handle not in handles
    assert not held.query() and not timing.query(), "a held event was re-recorded"
    c = ctx.create_stream()
    c.wait(held)
    ran: List[int] = []
    qd.launch_host_fn(lambda: ran.append(1), stream=c)
    assert not c.query() and ran == []
    gate.set()
    c.synchronize()
    assert ran == [1] and held.query() and timing.query()


def test_threads_recording_at_once_never_share_an_event(ctx: qd.Context) -> None:
    streams = [ctx.create_stream() for _ in range(4)]
    for s in streams:  # a few events in the pool for the threads to take
        s.record().close()
    held: List[List[qd.Event]] = [[] for _ in streams]
    errors: List[BaseException] = []

    def run(i: int) -> None:
        try:
            for _ in range(200):
                ev = streams[i].record()
                held[i].append(ev)
                if len(held[i]) > 8:
                    held[i].pop(0).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    live = [ev.handle for evs in held for ev in evs]
    assert len(live) == len(set(live)), "two held events share a handle"
    for s in streams:
        s.synchronize()


def stream_kinds(ctx: qd.Context) -> Iterator[qd.Stream]:
    yield ctx.create_stream()
    yield ctx.acquire_stream()
    yield ctx.default_stream


def test_record_works_on_every_kind_of_stream(ctx: qd.Context) -> None:
    for s in stream_kinds(ctx):
        ev = s.record()
        ev.synchronize()
        assert ev.query(), s
        s.close()


def test_a_call_of_another_shape_is_refused_as_python_refuses_it(ctx: qd.Context,
                                                                 stream: qd.Stream,
                                                                 pools: Any) -> None:
    stream.record().close()
    live = ctx.stats().live_events
    calls = [((True,), {}, "takes 1 positional argument but 2 were given"),
             ((), {"timin": True}, "got an unexpected keyword argument 'timin'"),
             ((), {"timing": True, "other": 1}, "got an unexpected keyword argument 'other'")]
    for args, kwargs, words in calls:
        with pytest.raises(TypeError) as info:
            stream.record(*args, **kwargs)
        assert str(info.value) == f"Stream.record() {words}"
    assert len(pools[0]) == 1 and pools[1] == [] and ctx.stats().live_events == live
    assert stream.record(**{"timing": True}).timing is True
