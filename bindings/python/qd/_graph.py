"""Graphs: capture stream work once, replay it many times (qd.h, "Graphs").

::

    with stream.capture() as graph:      # qd_stream_begin_capture ... qd_stream_end_capture
        kernel.launch(buf, stream=stream)
        qd.launch_parallel(tasks, stream=stream)
    graph.launch(stream=other)           # qd_graph_launch: any stream of the same context
    graph.update(new_graph)              # qd_graph_update: same shape, new argument values
    graph.close()                        # qd_graph_destroy: replays in flight still complete
"""

from __future__ import annotations

from ctypes import c_uint64
from typing import TYPE_CHECKING, Any, Optional

from . import _lib
from ._lib import C as _C, H as _H, ref as _ref
from ._errors import HandleTypeError, InvalidOperationError, ObjectClosedError
from ._base import _C_ZERO, _err
from ._callbacks import _capture_keep, _capture_mark
from ._stream import Stream, _ContextChild, _stream_c

if TYPE_CHECKING:
    from ._context import Context

__all__ = ["Graph", "Capture"]

_f_graph_destroy = _lib.raw("qd_graph_destroy")
_f_graph_launch = _lib.raw("qd_graph_launch")


class Graph(_ContextChild):
    """A captured graph (``Stream.capture()``). Replay it with ``launch(stream=...)``; give it
    the argument values of another capture of the same calls with ``update(other)``; destroy it
    with ``close()`` (or ``with graph:``). Until its capture ended the graph is empty and every
    call on it raises InvalidOperationError."""

    __slots__ = ("_h", "_c", "_key", "_ctx", "_pending", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make graphs with Stream.capture()")

    def __repr__(self) -> str:
        if self._pending:
            return "<qd.Graph (capturing)>"
        state = "closed" if self.closed else f"{self._h:#x}"
        return f"<qd.Graph {state}>"

    def _closed_error(self) -> Exception:
        if self._pending:
            return InvalidOperationError(
                "this qd.Graph is still being captured: use it after the `with "
                "stream.capture()` block")
        return ObjectClosedError(f"this qd.Graph (handle {self._key:#x}) was closed")

    _destroy = staticmethod(_f_graph_destroy)

    def close(self) -> None:
        """Destroy the graph; returns at once, replays already queued still run. Idempotent."""
        self._close()

    def launch(self, *, stream: Stream) -> None:
        """Replay the graph on ``stream`` (required; any stream of the graph's context): it
        starts after the work queued there so far, and later work there waits for all of it.

        Raises:
            WrongContextError: the stream belongs to another context.
            InvalidOperationError: the stream is capturing.
        """
        sc = _stream_c(stream, self._ctx)
        if not self._h:
            raise self._closed_error()
        status = _f_graph_launch(self._c, sc)
        if status:
            raise _err(status, self._ctx)

    def update(self, other: "Graph") -> None:
        """Later replays of this graph use ``other``'s values (``qd_graph_update``): a capture
        of the same calls, in the same order on the same streams, with other arguments.

        Raises:
            InvalidOperationError: the shapes differ.
            WrongContextError: the graphs belong to different contexts.
        """
        if not isinstance(other, Graph):
            raise HandleTypeError(f"update() takes a qd.Graph, not {type(other).__name__}")
        if not self._h:
            raise self._closed_error()
        if not other._h:
            raise other._closed_error()
        status = _C.qd_graph_update(self._h, other._h)
        if status:
            raise _err(status, self._ctx)


def _new_graph(ctx: "Context") -> Graph:
    g = object.__new__(Graph)
    g._h = g._key = 0
    g._c = _C_ZERO
    g._ctx = ctx
    g._pending = True
    return g


class Capture:
    """The context manager of ``Stream.capture()``: begins the capture on entry and returns
    the (still empty) Graph; ends it on exit and fills the Graph. If the block raised, the
    capture is ended and its graph destroyed, and the block's exception propagates."""

    __slots__ = ("_stream", "_graph", "_mark")

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._graph: Optional[Graph] = None
        self._mark = 0

    def __enter__(self) -> Graph:
        s = self._stream
        s._check()
        self._mark = _capture_mark()
        status = _C.qd_stream_begin_capture(s._h)
        if status:
            raise _err(status, s._ctx)
        self._graph = _new_graph(s._ctx)
        return self._graph

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        g = self._graph
        assert g is not None
        try:
            _end(self._stream, g, self._mark)
        except BaseException:
            if exc_type is None:
                raise
            return  # the block's own exception is the one to see
        if exc_type is not None:
            g.close()


# Streams whose `with stream.capture()` could not end the capture: stream handle -> the capture's
# callback mark, for Stream.end_capture().
_open_marks: dict = {}


def _end(s: Stream, g: Graph, mark: int) -> None:
    """qd_stream_end_capture into ``g``. On an error (a fork not joined back) the stream stays
    capturing, as in C: join the stream the message names, then call ``Stream.end_capture()``."""
    out = c_uint64()
    status = _C.qd_stream_end_capture(s._h, _ref(out))
    if status:
        _open_marks[s._h] = mark
        raise _err(status, s._ctx)
    g._pending = False
    g._h = g._key = out.value
    g._c = _H(out.value)
    # Python host callbacks queued during the capture: replays call them again.
    _capture_keep(mark, s._ctx._h)


def end_capture(s: Stream) -> Graph:
    """``Stream.end_capture()``: end a capture whose ``with`` block could not end it."""
    s._check()
    g = _new_graph(s._ctx)
    _end(s, g, _open_marks.pop(s._h, 0))
    return g
