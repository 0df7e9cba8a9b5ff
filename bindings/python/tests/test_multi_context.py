"""Several contexts of one backend (qd.h, "Several devices"): waits across contexts, peer
access and peer copies, on two CPU contexts (the semantics CI can check without a GPU)."""

from __future__ import annotations

import threading

import pytest

import qd


@pytest.fixture
def pair():
    with qd.Context("cpu") as a, qd.Context("cpu") as b:
        yield a, b


def test_a_stream_waits_for_an_event_of_another_context(pair) -> None:
    a, b = pair
    sa, sb = a.create_stream(), b.create_stream()
    gate = threading.Event()
    seen = []
    qd.launch_host_fn(gate.wait, stream=sa)
    qd.launch_host_fn(lambda: seen.append("a"), stream=sa)
    ev = sa.record()  # an event of context a
    sb.wait(ev)
    qd.launch_host_fn(lambda: seen.append("b"), stream=sb)
    assert sb.query() is False  # b waits for a's gated work
    gate.set()
    sb.synchronize()
    assert seen == ["a", "b"]


def test_wait_stream_of_another_context_orders_after_its_queued_work(pair) -> None:
    a, b = pair
    sa, sb = a.create_stream(), b.create_stream()
    gate = threading.Event()
    seen = []
    qd.launch_host_fn(gate.wait, stream=sa)
    qd.launch_host_fn(lambda: seen.append("a"), stream=sa)
    sb.wait(sa)
    qd.launch_host_fn(lambda: seen.append("b"), stream=sb)
    assert sb.query() is False
    gate.set()
    sb.synchronize()
    assert seen == ["a", "b"]


def test_peer_access_between_cpu_contexts_is_always_possible(pair) -> None:
    a, b = pair
    assert a.can_access_peer(b) is True
    a.enable_peer_access(b)
    a.enable_peer_access(b)  # again: a no-op
    with pytest.raises(qd.InvalidArgumentError):
        a.can_access_peer(a)
    with pytest.raises(qd.ArgumentTypeError):
        a.enable_peer_access(b.default_stream)


def test_peer_copy_in_both_directions_ordered_by_events(pair) -> None:
    a, b = pair
    sa, sb = a.default_stream, b.default_stream
    n = 1 << 16
    buf_a, buf_b = qd.alloc(n, stream=sa), qd.alloc(n, stream=sb)
    qd.memset(buf_a, 0x11, stream=sa)
    sb.wait(sa.record())
    qd.memcpy_peer(buf_b, buf_a, stream=sb)  # issued on the destination's stream
    out = bytearray(n)
    qd.memcpy(out, buf_b, stream=sb)
    sb.synchronize()
    assert out == bytes([0x11]) * n
    qd.memset(buf_b, 0x22, stream=sb)
    qd.memcpy_peer(buf_a, buf_b, stream=sb)  # issued on the source's stream
    sa.wait(sb.record())
    qd.memcpy(out, buf_a, stream=sa)
    sa.synchronize()
    assert out == bytes([0x22]) * n
    host_b = b.host_alloc(256)
    qd.memcpy_peer(host_b, buf_a, 256, stream=sa)
    sa.synchronize()
    assert bytes(host_b.view) == bytes([0x22]) * 256
    qd.free(buf_a, stream=sa)
    qd.free(buf_b, stream=sb)


def test_peer_copy_checks_each_range_against_its_own_context(pair) -> None:
    a, b = pair
    sa = a.default_stream
    buf_a = qd.alloc(64, stream=sa)
    buf_b = qd.alloc(64, stream=b.default_stream)
    with pytest.raises(qd.InvalidAddressError):
        qd.memcpy_peer(buf_b, buf_a, 128, stream=sa)  # past the end of both
    with qd.Context("cpu") as third:
        with pytest.raises(qd.WrongContextError):
            qd.memcpy_peer(buf_b, buf_a, stream=third.default_stream)
    with pytest.raises(qd.ArgumentTypeError):
        qd.memcpy_peer(buf_b, int(buf_a), 64, stream=sa)  # an int names no context
    with pytest.raises(TypeError):
        qd.memcpy_peer(buf_b, buf_a)  # type: ignore[call-arg]  # stream= is required
    qd.free(buf_a, stream=sa)
    qd.free(buf_b, stream=b.default_stream)
