"""Child graphs (qd.h, "Graphs", "Child graphs"): ``graph.launch(stream=s)`` on a capturing
stream records the graph into that capture. The binding refuses nothing before C, and the new
graph keeps the child's Python callbacks, so the child may be closed before the parent runs."""

from __future__ import annotations

import ctypes
import gc

import qd


def test_a_graph_launched_inside_a_capture_becomes_part_of_it(kernels, ctx: qd.Context) -> None:
    s = ctx.create_stream()
    halves = [qd.alloc(8, stream=s) for _ in range(2)]
    for half in halves:
        qd.memset(half, 0, stream=s)
    s.synchronize()
    calls: list = []
    with s.capture() as child:
        kids = s.fork(2)
        for k, half in zip(kids, halves):
            kernels.add_one.launch(half.address, ctypes.c_uint32(2), block=2, stream=k)
        s.join(kids)
        qd.launch_host_fn(lambda: calls.append("child"), stream=s)
    with s.capture() as parent:
        kernels.add_one.launch(halves[0].address, ctypes.c_uint32(2), block=2, stream=s)
        child.launch(stream=s)  # recorded, not run
        kernels.add_one.launch(halves[1].address, ctypes.c_uint32(2), block=2, stream=s)
    assert calls == [], "the child ran during the parent's capture"
    child.close()  # the parent copied its operations and keeps its callback
    del child
    gc.collect()
    host = (ctypes.c_int32 * 4)()
    for i in range(1, 4):
        parent.launch(stream=s)
        for j, half in enumerate(halves):
            qd.memcpy(ctypes.addressof(host) + 8 * j, half, 8, stream=s)
        s.synchronize()
        assert list(host) == [2 * i, 2 * i, 2 * i, 2 * i]
        assert calls == ["child"] * i, "the child's callback runs on every replay of the parent"
    parent.close()
    assert ctx.stats().stream_pool_leased == 0
    for half in halves:
        qd.free(half, stream=s)
    s.synchronize()
