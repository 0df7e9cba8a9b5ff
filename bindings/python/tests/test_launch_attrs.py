"""Launch attributes (qd.h, "Launch attributes"): Kernel.launch's and Task's keyword arguments
``cluster``, ``programmatic``, ``priority`` and ``completion_event`` (``qd_launch_ex``), with
their CPU meanings and refusals."""

from __future__ import annotations

import ctypes

import pytest

import qd


def test_attributes_run_with_their_cpu_meanings(ctx: qd.Context, stream: qd.Stream) -> None:
    seen = []
    done = ctx.create_event()

    def kernel(info: qd.HostKernelInfo, args) -> None:
        seen.append((info.block_idx[0], done.query()))

    k = qd.Kernel.from_host_fn(ctx, kernel)
    k.launch(grid=4, stream=stream, cluster=(2, 1, 1), programmatic=True, priority=-1,
             completion_event=done)
    stream.synchronize()
    # Blocks in order; the completion event completes as the last block starts.
    assert seen == [(0, False), (1, False), (2, False), (3, True)]
    assert done.query()


def test_no_attribute_given_is_a_plain_launch(ctx: qd.Context, stream: qd.Stream) -> None:
    hits = []
    k = qd.Kernel.from_host_fn(ctx, lambda info, args: hits.append(1))
    k.launch(stream=stream, programmatic=False)
    stream.synchronize()
    assert hits == [1]


def test_refusals_name_the_attribute(ctx: qd.Context, stream: qd.Stream) -> None:
    k = qd.Kernel.from_host_fn(ctx, lambda info, args: None)
    with pytest.raises(qd.InvalidArgumentError, match="does not divide grid"):
        k.launch(grid=3, stream=stream, cluster=2)
    with pytest.raises(qd.InvalidArgumentError, match="cluster"):
        k.launch(grid=3, stream=stream, cluster=0)
    with pytest.raises(qd.ArgumentTypeError):
        k.launch(stream=stream, priority="high")
    with pytest.raises(qd.HandleTypeError):
        k.launch(stream=stream, completion_event=stream)
    with qd.Context("cpu") as other:
        foreign = other.create_event()
        with pytest.raises(qd.WrongContextError, match=r"attrs\[0\]"):
            k.launch(stream=stream, completion_event=foreign)
        foreign.close()


def test_task_attributes_go_to_launch_parallel(ctx: qd.Context, stream: qd.Stream) -> None:
    seen = []
    done = ctx.create_event()

    def kernel(info: qd.HostKernelInfo, args) -> None:
        seen.append((info.block_idx[0], done.query()))

    k = qd.Kernel.from_host_fn(ctx, kernel)
    qd.launch_parallel([qd.Task(k, grid=2, programmatic=True, completion_event=done)],
                       stream=stream)
    stream.synchronize()
    assert seen == [(0, False), (1, True)]
    with pytest.raises(qd.InvalidArgumentError, match=r"tasks\[0\]\.attrs\[0\]"):
        qd.launch_parallel([qd.Task(k, grid=3, cluster=2)], stream=stream)
