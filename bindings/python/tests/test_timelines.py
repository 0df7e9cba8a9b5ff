"""Timelines (qd.h, "Timelines"): Context.create_timeline, Stream.signal / Stream.wait with a
timeline and a value, Timeline.signal / .wait / .value on the host, close(). On the CPU backend;
no test depends on timing (a zero or short timeout only says "not yet")."""

from __future__ import annotations

import threading

import pytest

import qd


@pytest.fixture
def ctx():
    with qd.Context("cpu") as c:
        yield c


def test_create_starts_at_initial_value_and_is_counted(ctx) -> None:
    before = ctx.stats().live_timelines
    tl = ctx.create_timeline(5)
    assert tl.value == 5
    assert ctx.stats().live_timelines == before + 1
    tl.close()
    assert tl.closed
    assert ctx.stats().live_timelines == before
    tl.close()  # idempotent
    with pytest.raises(qd.ObjectClosedError):
        tl.value


def test_wait_queued_before_signal_holds_the_stream_until_the_host_signals(ctx) -> None:
    with ctx.create_timeline() as tl, ctx.create_stream() as s:
        ran = []
        s.wait(tl, 2)
        qd.launch_host_fn(lambda: ran.append(1), stream=s)
        assert not s.query()
        assert tl.wait(2, timeout=0) is False
        tl.signal(2)
        s.synchronize()
        assert ran == [1]
        assert tl.wait(2, timeout=0) is True


def test_stream_signal_releases_another_streams_wait(ctx) -> None:
    with ctx.create_timeline() as tl, ctx.create_stream() as a, ctx.create_stream() as b:
        b.wait(tl, 1)
        a.signal(tl, 1)
        b.synchronize()
        assert tl.value == 1
        assert tl.wait(1) is True


def test_values_only_grow(ctx) -> None:
    with ctx.create_timeline(3) as tl, ctx.create_stream() as s:
        with pytest.raises(qd.InvalidArgumentError):
            s.signal(tl, 3)
        with pytest.raises(qd.InvalidArgumentError):
            tl.signal(1)
        with pytest.raises(qd.ArgumentRangeError):
            tl.signal(-1)
        with pytest.raises(qd.ArgumentTypeError):
            tl.signal("4")  # type: ignore[arg-type]
        assert tl.value == 3


def test_host_wait_is_woken_by_another_thread_and_by_close(ctx) -> None:
    tl = ctx.create_timeline()
    got = []
    t = threading.Thread(target=lambda: got.append(tl.wait(4)))
    t.start()
    tl.signal(4)
    t.join()
    assert got == [True]
    errors = []

    def waiter() -> None:
        try:
            tl.wait(9)
        except qd.QdError as e:
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    tl.close()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], (qd.InvalidHandleError,
                                                       qd.ObjectClosedError))


def test_timeline_of_another_context_is_wrong_context(ctx) -> None:
    with qd.Context("cpu") as other, other.create_timeline() as tl, ctx.create_stream() as s:
        with pytest.raises(qd.WrongContextError):
            s.wait(tl, 1)
        with pytest.raises(qd.WrongContextError):
            s.signal(tl, 1)


def test_wait_with_a_value_needs_a_timeline(ctx) -> None:
    with ctx.create_stream() as s, ctx.create_timeline() as tl:
        with pytest.raises(qd.HandleTypeError):
            s.wait(s, 1)
        with pytest.raises(qd.HandleTypeError):
            s.wait(tl)


def test_closing_the_context_closes_its_timelines(ctx) -> None:
    c = qd.Context("cpu")
    tl = c.create_timeline()
    c.close()
    assert tl.closed
    with pytest.raises(qd.ObjectClosedError):
        tl.signal(1)
