"""A graph's DOT and its upload (qd.h, qd_graph_debug_dot, qd_graph_upload): ``debug_dot``
writes the recorded operations with their fork and join edges, ``verbose`` adds argument sizes,
bad paths raise InvalidArgumentError; ``upload`` then ``launch`` gives the launch's results, and
an upload on a capturing stream or of a closed graph raises before C is reached."""

from __future__ import annotations

import ctypes
import re

import pytest

import qd


def _parallel_graph(kernels, s: qd.Stream, buf: qd.DeviceBuffer) -> qd.Graph:
    # Each lane adds to its own half of buf: said so for the validation pass, which otherwise
    # takes each lane's pointer as reaching to the end of the buffer.
    kernels.add_one.set_param_access(0, "partitioned")
    with s.capture() as graph:
        qd.memset(buf, 0, stream=s)
        qd.launch_parallel([qd.Task(kernels.add_one, buf.address + 8 * g, ctypes.c_uint32(2),
                                    block=2, group=g) for g in range(2)], stream=s)
    return graph


def test_debug_dot_writes_each_operation_and_the_fork_and_join_edges(kernels, ctx, tmp_path):
    s = ctx.create_stream()
    buf = qd.alloc(16, stream=s)
    graph = _parallel_graph(kernels, s, buf)
    path = tmp_path / "g.dot"
    graph.debug_dot(path)
    text = path.read_text()
    assert text.startswith("digraph qd_graph {")
    nodes = re.findall(r"^\s*n\d+ \[label=\"([^\"]*)\"", text, re.M)
    # memset, the fork's record and 2 waits, 2 launches, the join's 2 records and 2 waits
    assert len(nodes) == 1 + 1 + 2 + 2 + 2 + 2
    assert sum(label.endswith("add_one\\ngrid (1,1,1) block (2,1,1)")
               for label in nodes) == 2
    assert len(re.findall(r'label="fork"', text)) == 2
    assert len(re.findall(r'label="join"', text)) == 2
    assert "args" not in text
    graph.debug_dot(str(path), verbose=True)
    assert "args 8, 4 B" in path.read_text()
    graph.close()


def test_debug_dot_bad_path_raises_invalid_argument(kernels, ctx, tmp_path):
    s = ctx.create_stream()
    buf = qd.alloc(16, stream=s)
    graph = _parallel_graph(kernels, s, buf)
    with pytest.raises(qd.InvalidArgumentError, match="directory"):
        graph.debug_dot(tmp_path)
    with pytest.raises(qd.InvalidArgumentError, match="empty"):
        graph.debug_dot("")
    with pytest.raises(qd.InvalidArgumentError, match="cannot be written"):
        graph.debug_dot(tmp_path / "missing" / "g.dot")
    with pytest.raises(qd.InvalidArgumentError, match="verbose"):
        graph.debug_dot(tmp_path / "g.dot", verbose=1)
    graph.close()
    with pytest.raises(qd.ObjectClosedError):
        graph.debug_dot(tmp_path / "g.dot")


def test_upload_then_launch_gives_the_launch_results(kernels, ctx):
    s = ctx.create_stream()
    buf = qd.alloc(16, stream=s)
    graph = _parallel_graph(kernels, s, buf)
    other = ctx.create_stream()
    other.wait(s)  # the allocation on s happens before the graph's memset on other
    graph.upload(s)
    graph.upload(stream=s)
    for _ in range(2):
        graph.launch(stream=other)
        host = (ctypes.c_int32 * 4)()
        qd.memcpy(ctypes.addressof(host), buf, 16, stream=other)
        other.synchronize()
        assert list(host) == [1, 1, 1, 1]
    graph.close()


def test_upload_on_a_capturing_stream_raises_and_the_capture_goes_on(kernels, ctx):
    s = ctx.create_stream()
    buf = qd.alloc(16, stream=s)
    graph = _parallel_graph(kernels, s, buf)
    c = ctx.create_stream()
    with c.capture() as captured:
        with pytest.raises(qd.InvalidOperationError, match="capturing"):
            graph.upload(c)
        kernels.noop.launch(stream=c)
    assert captured.kernel_node_count == 1
    graph.close()
    with pytest.raises(qd.ObjectClosedError):
        graph.upload(s)
    closed = ctx.create_stream()
    closed.close()
    with pytest.raises(qd.ObjectClosedError):
        captured.upload(closed)
