"""Graphs: ``with stream.capture() as graph`` and ``graph.launch(stream=...)`` (qd.h,
"Graphs"): replays equal direct execution, updates with new arguments, Python host callbacks
that run on every replay, and the misuse errors."""

from __future__ import annotations

import ctypes

import pytest

import qd


def _step(kernels, s: qd.Stream, halves: list, log, value: int, calls: list) -> None:
    # The data is four int32 in two qd allocations of two (the validation mode, QD_VALIDATE=1,
    # sees every access to them; a launch argument counts as an access from its address to the
    # end of its block). Each group of the parallel launch increments its own half, twice in
    # order: two groups writing the same ints would race (the groups run concurrently). The log
    # is appended to atomically (append_log) by the two forked children at once, on purpose, so
    # it stays in the program's own memory, which the validation mode does not track.
    for half in halves:
        kernels.add_one.launch(half.address, ctypes.c_uint32(2), block=2, stream=s)
    kids = s.fork(2)
    for i, k in enumerate(kids):
        kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(value + i), stream=k)
    s.join(kids)
    qd.launch_parallel([qd.Task(kernels.add_one, halves[g].address, ctypes.c_uint32(2), block=2,
                                group=g) for g in range(2) for _ in range(2)], stream=s)
    qd.launch_host_fn(lambda: calls.append(value), stream=s)


def _read(halves: list, s: qd.Stream) -> list:
    host = (ctypes.c_int32 * 4)()
    for i, half in enumerate(halves):
        qd.memcpy(ctypes.addressof(host) + 8 * i, half, 8, stream=s)
    s.synchronize()
    return list(host)


def test_capture_and_replay_equal_direct(kernels, ctx: qd.Context) -> None:
    s = ctx.create_stream()
    direct = [qd.alloc(8, stream=s) for _ in range(2)]
    replayed = [qd.alloc(8, stream=s) for _ in range(2)]
    for half in direct + replayed:
        qd.memset(half, 0, stream=s)
    s.synchronize()  # the replays on another stream are ordered after the allocations
    log_d = (ctypes.c_uint32 * 64)()
    log_r = (ctypes.c_uint32 * 64)()  # 2 appends per replay
    calls: list = []
    _step(kernels, s, direct, log_d, 5, calls)
    assert _read(direct, s) == [3, 3, 3, 3] and calls == [5]
    with s.capture() as graph:
        _step(kernels, s, replayed, log_r, 5, calls)
    assert isinstance(graph, qd.Graph)
    assert _read(replayed, s) == [0, 0, 0, 0] and calls == [5], "captured work ran"
    other = ctx.create_stream()
    for i in range(1, 11):
        graph.launch(stream=other)
        assert _read(replayed, other) == [3 * i] * 4
        assert log_r[0] == 2 * i and sorted(log_r[1:3]) == [5, 6]
        assert calls == [5] * (i + 1), "the captured Python callback runs on every replay"
    graph.close()
    graph.close()  # idempotent
    with pytest.raises(qd.ObjectClosedError):
        graph.launch(stream=s)
    assert ctx.stats().live_graphs == 0
    assert ctx.stats().stream_pool_leased == 0
    for half in direct + replayed:
        qd.free(half, stream=s)
    s.synchronize()


def test_update_with_new_arguments(kernels, ctx: qd.Context, stream: qd.Stream) -> None:
    log = (ctypes.c_uint32 * 64)()

    def capture(value: int) -> qd.Graph:
        with stream.capture() as g:
            kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(value), stream=stream)
        return g

    graph = capture(0)
    for i in range(1, 31):
        with capture(100 + i) as fresh:
            graph.update(fresh)
        graph.launch(stream=stream)
    stream.synchronize()
    assert log[0] == 30
    assert list(log[1:31]) == [100 + i for i in range(1, 31)]
    with stream.capture() as two:
        kernels.noop.launch(stream=stream)
        kernels.noop.launch(stream=stream)
    with pytest.raises(qd.InvalidOperationError):
        graph.update(two)
    with pytest.raises(qd.HandleTypeError):
        graph.update(stream)  # type: ignore[arg-type]
    graph.close()
    two.close()


def test_misuse(kernels, ctx: qd.Context, stream: qd.Stream) -> None:
    with stream.capture() as g:
        with pytest.raises(qd.InvalidOperationError):
            stream.synchronize()
        with pytest.raises(qd.InvalidOperationError):
            stream.query()
        # Allocation is captured: the block is the graph's and is freed inside the capture.
        qd.alloc(64, stream=stream).free(stream=stream)
        with pytest.raises(qd.InvalidOperationError):
            g.launch(stream=stream)  # still being captured
        with pytest.raises(qd.InvalidOperationError):
            stream.capture().__enter__()  # already capturing
    g.launch(stream=stream)
    stream.synchronize()
    # An unjoined fork: the end names the child; the capture stays open until it is joined.
    with pytest.raises(qd.InvalidOperationError) as info:
        with stream.capture():
            kids = stream.fork(1)
    assert f"{kids[0].handle:016x}" in str(info.value)
    stream.join(kids)
    g2 = stream.end_capture()  # still capturing: end it now that the child joined back
    g2.launch(stream=stream)
    other = qd.Context("cpu")
    try:
        with pytest.raises(qd.WrongContextError):
            g2.launch(stream=other.create_stream())
    finally:
        other.close()
    with pytest.raises(TypeError):
        qd.Graph()


def test_exception_in_block_ends_capture_and_propagates(kernels, ctx: qd.Context,
                                                       stream: qd.Stream) -> None:
    with pytest.raises(ZeroDivisionError):
        with stream.capture() as g:
            kernels.noop.launch(stream=stream)
            1 / 0
    assert g.closed
    stream.synchronize()  # no longer capturing
    assert ctx.stats().live_graphs == 0


def test_set_kernel_args_later_replays_run_the_new_values(kernels, stream: qd.Stream) -> None:
    log = (ctypes.c_uint32 * 64)()
    with stream.capture() as graph:
        kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(1), stream=stream)
        kernels.append_log.launch(ctypes.addressof(log), ctypes.c_uint32(2), stream=stream)
    assert graph.kernel_node_count == 2
    graph.launch(stream=stream)
    graph.set_kernel_args(1, ctypes.addressof(log), ctypes.c_uint32(20))
    graph.launch(stream=stream)
    stream.synchronize()
    assert log[0] == 4 and list(log[1:5]) == [1, 2, 1, 20]
    # Refused, nothing changed: a node past the last, another count or size of arguments.
    with pytest.raises(qd.InvalidArgumentError):
        graph.set_kernel_args(2, ctypes.addressof(log), ctypes.c_uint32(0))
    with pytest.raises(qd.InvalidArgumentError):
        graph.set_kernel_args(0, ctypes.addressof(log))
    with pytest.raises(qd.InvalidArgumentError):
        graph.set_kernel_args(0, ctypes.addressof(log), ctypes.c_uint64(0))
    with pytest.raises(qd.InvalidArgumentError):
        graph.set_kernel_args(-1, ctypes.addressof(log), ctypes.c_uint32(0))
    graph.launch(stream=stream)
    stream.synchronize()
    assert log[0] == 6 and list(log[5:7]) == [1, 20]
    graph.close()
    with pytest.raises(qd.ObjectClosedError):
        graph.kernel_node_count
    with pytest.raises(qd.ObjectClosedError):
        graph.set_kernel_args(0, ctypes.addressof(log), ctypes.c_uint32(0))
