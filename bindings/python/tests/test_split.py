"""SM partitions (qd.h, "SM partitions"): Context.split on the CPU backend, where a context's
worker threads play the SM count (what CI can check without a GPU)."""

from __future__ import annotations

import threading

import pytest

import qd


@pytest.fixture
def ctx():
    with qd.Context("cpu", cpu_worker_threads=4) as c:
        yield c


def test_split_returns_contexts_over_disjoint_workers(ctx) -> None:
    parts = ctx.split([2, 2])
    try:
        assert len(parts) == 2
        assert all(isinstance(p, qd.Context) for p in parts)
        assert parts[0].handle != parts[1].handle != ctx.handle
        seen = [set(), set()]
        for i, part in enumerate(parts):
            streams = [part.create_stream() for _ in range(3)]
            for _ in range(10):
                for s in streams:
                    qd.launch_host_fn(lambda i=i: seen[i].add(threading.get_ident()), stream=s)
            part.synchronize()
        assert seen[0] and seen[1]
        assert not seen[0] & seen[1], "a worker thread served two parts"
    finally:
        for p in parts:
            p.close()


def test_work_of_two_parts_is_ordered_by_a_cross_context_wait(ctx) -> None:
    a, b = ctx.split([2, 2])
    with a, b:
        sa, sb = a.create_stream(), b.create_stream()
        gate = threading.Event()
        seen = []
        qd.launch_host_fn(gate.wait, stream=sa)
        qd.launch_host_fn(lambda: seen.append("a"), stream=sa)
        sb.wait(sa.record())
        qd.launch_host_fn(lambda: seen.append("b"), stream=sb)
        assert sb.query() is False
        gate.set()
        sb.synchronize()
        assert seen == ["a", "b"]


def test_the_parent_may_be_closed_first() -> None:
    parent = qd.Context("cpu", cpu_worker_threads=2)
    (part,) = parent.split([1])
    parent.close()
    with part:
        s = part.create_stream()
        done = []
        qd.launch_host_fn(lambda: done.append(1), stream=s)
        s.synchronize()
        assert done == [1]


def test_an_impossible_split_is_refused_and_makes_nothing(ctx) -> None:
    with pytest.raises(qd.InvalidArgumentError, match="add up to 5 workers"):
        ctx.split([1, 4])
    with pytest.raises(qd.InvalidArgumentError, match="counts\\[1\\] is 0"):
        ctx.split([1, 0])
    with pytest.raises(qd.InvalidArgumentError):
        ctx.split([])
    with pytest.raises(qd.ArgumentRangeError):
        ctx.split([-1])
    (part,) = ctx.split([4])  # the context is as it was
    part.close()


def test_a_part_cannot_be_split_again(ctx) -> None:
    (part,) = ctx.split([2])
    with part:
        with pytest.raises(qd.InvalidOperationError, match="part"):
            part.split([1])


def test_device_properties_report_the_split_rule() -> None:
    props = qd.device_properties("cpu")
    assert props.split_granularity == 1
    assert props.split_minimum == 1
