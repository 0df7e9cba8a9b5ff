"""Events: record, query, synchronize, timing."""

from __future__ import annotations

import threading
import time

import pytest

import qd


def test_event_constructor_is_not_public() -> None:
    with pytest.raises(TypeError):
        qd.Event()


def test_record_query_synchronize(ctx: qd.Context, stream: qd.Stream) -> None:
    ev = ctx.create_event()
    assert ev.query() is True  # never recorded: complete
    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(5), stream=stream)
    assert ev.record(stream=stream) is ev
    assert ev.query() is False and ev.is_done is False
    gate.set()
    ev.synchronize()
    assert ev.query() is True
    ev.close()
    ev.close()
    with pytest.raises(qd.ObjectClosedError):
        ev.record(stream=stream)


def test_timing(ctx: qd.Context, stream: qd.Stream) -> None:
    start, end = ctx.create_event(timing=True), ctx.create_event(timing=True)
    assert start.timing
    start.record(stream=stream)
    qd.launch_host_fn(lambda: time.sleep(0.03), stream=stream)
    end.record(stream=stream)
    end.synchronize()
    ms = start.elapsed_ms(end)
    assert 25.0 <= ms < 2000.0
    assert end - start == pytest.approx(ms)
    assert end.elapsed_ms(start) == pytest.approx(-ms)


def test_timing_errors(ctx: qd.Context, stream: qd.Stream) -> None:
    plain = ctx.create_event()
    t1, t2 = ctx.create_event(timing=True), ctx.create_event(timing=True)
    with pytest.raises(qd.NotRecordedError):
        t1.elapsed_ms(t2)
    t1.record(stream=stream)
    plain.record(stream=stream)
    stream.synchronize()
    with pytest.raises(qd.TimingDisabledError):
        t1.elapsed_ms(plain)
    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(5), stream=stream)
    t2.record(stream=stream)
    with pytest.raises(qd.NotReadyError) as info:
        t1.elapsed_ms(t2)
    assert info.value.status == qd.Status.NOT_READY
    gate.set()
    stream.synchronize()
    assert t1.elapsed_ms(t2) >= 0.0
    with pytest.raises(qd.HandleTypeError):
        t1.elapsed_ms(stream)
    with pytest.raises(TypeError):
        t1 - 3


def test_recording_on_another_contexts_stream_is_wrong_context_waiting_is_allowed(
        ctx: qd.Context, stream: qd.Stream) -> None:
    with qd.Context("cpu") as other:
        ev = other.create_event()
        with pytest.raises(qd.WrongContextError) as info:
            ev.record(stream=stream)
        assert info.value.status == qd.Status.ERROR_WRONG_CONTEXT
        stream.wait(ev)  # a wait may cross contexts of one backend (since 0.2)


def test_not_ready_error_words_its_own_message_not_an_earlier_errors(ctx: qd.Context,
                                                                      stream: qd.Stream) -> None:
    # An earlier failure leaves its text in qd_last_error_message(); QD_NOT_READY is not an
    # error, so the C library writes none, and the binding must not show the old one.
    with pytest.raises(qd.InvalidArgumentError, match="has no '/'"):
        ctx.load_module("nope.so")
    start, end = ctx.create_event(timing=True), ctx.create_event(timing=True)
    gate = threading.Event()
    start.record(stream=stream)
    qd.launch_host_fn(gate.wait, stream=stream)  # holds the stream until the gate opens
    end.record(stream=stream)
    try:
        with pytest.raises(qd.NotReadyError) as info:
            end - start
        assert "nope.so" not in str(info.value) and "'/'" not in info.value.message
        assert "not completed" in info.value.message
        assert info.value.status == qd.Status.NOT_READY
    finally:
        gate.set()
    end.synchronize()
    assert (end - start) >= 0.0
