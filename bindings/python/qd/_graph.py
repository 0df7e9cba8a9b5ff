"""Graphs: capture stream work once, replay it many times (qd.h, "Graphs").

::

    with stream.capture() as graph:      # qd_stream_begin_capture ... qd_stream_end_capture
        kernel.launch(buf, stream=stream)
        qd.launch_parallel(tasks, stream=stream)
    graph.launch(stream=other)           # qd_graph_launch: any stream of the same context
    graph.update(new_graph)              # qd_graph_update: same shape, new argument values
    graph.set_kernel_args(0, buf, 7)     # qd_graph_set_kernel_args: one launch's new values
    graph.upload(stream)                 # qd_graph_upload: the first replay costs what later ones do
    graph.debug_dot("graph.dot")         # qd_graph_debug_dot: the graph as Graphviz DOT
    graph.close()                        # qd_graph_destroy: replays in flight still complete
"""

from __future__ import annotations

import os
from ctypes import c_uint32, c_uint64
from typing import TYPE_CHECKING, Any, List, Optional, Set, Union

from . import _api, _lib
from ._lib import C as _C, H as _H, ref as _ref
from ._errors import (HandleTypeError, InvalidArgumentError, InvalidOperationError,
                      ObjectClosedError, Status)
from ._base import _C_ZERO, _NoCopy, _err, _f_stream_query
from ._callbacks import _Keep, _capture_keeps, _enqueue
from ._stream import Stream, _ContextChild, _as_stream, _with_context
from ._kernel import _pack_args

if TYPE_CHECKING:
    from ._context import Context

__all__ = ["Graph", "Capture"]

_f_graph_destroy = _lib.raw("qd_graph_destroy")
_f_graph_launch = _lib.raw("qd_graph_launch")
_f_set_kernel_args = _lib.raw("qd_graph_set_kernel_args")


class Graph(_ContextChild):
    """A captured graph (``Stream.capture()``). Replay it with ``launch(stream=...)``; give it
    the argument values of another capture of the same calls with ``update(other)``; destroy it
    with ``close()`` (or ``with graph:``). Until its capture ended the graph is empty and every
    call on it raises InvalidOperationError.

    The graph keeps what its replays touch that C cannot keep: the Python host callbacks and
    the Python buffers of the copies it captured. It lets go of them when it is closed (or
    updated, for its old ones) once every replay queued through it so far has run."""

    __slots__ = ("_h", "_c", "_key", "_ctx", "_pending", "_keep", "_launched", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make graphs with Stream.capture()")

    def __repr__(self) -> str:
        if self._pending:
            return "<qd.Graph (capturing)>"
        state = "closed" if self.closed else f"{self._h:#x}"
        return f"<qd.Graph {state}>"

    def _closed_error(self) -> Exception:
        if self._pending and not self._ctx._h:
            return ObjectClosedError("this qd.Graph's capture was ended by closing its "
                                     "qd.Context: the graph was never made")
        if self._pending:
            return InvalidOperationError(
                "this qd.Graph is still being captured: use it after the `with "
                "stream.capture()` block")
        return ObjectClosedError(f"this qd.Graph (handle {self._key:#x}) was closed"
                                 f"{_with_context(self)}")

    _destroy = staticmethod(_f_graph_destroy)

    def close(self) -> None:
        """Destroy the graph; returns at once, replays already queued still run (what they
        use is let go of after them). Idempotent."""
        if not self._h:
            return
        try:
            self._close()
        finally:
            keep, self._keep = self._keep, None
            launched, self._launched = self._launched, set()
            _retire(self._ctx, keep, launched)

    def __del__(self) -> None:
        try:
            if self._h:
                self._h = 0
                if not self._ctx._h:
                    return  # destroyed with its context, which let go of what it kept
                _f_graph_destroy(self._c)
                if self._keep is not None and self._launched:
                    # Replays may still run: held until the next Context.synchronize (no qd
                    # call from a finalizer beyond the destroy).
                    self._ctx._held.retired.append(self._keep)
        except BaseException:
            pass

    def launch(self, *, stream: Stream) -> None:
        """Replay the graph on ``stream`` (required; any stream of the graph's context): it
        starts after the work queued there so far, and later work there waits for all of it.
        On a capturing stream the graph is recorded into that capture as a child graph (qd.h,
        "Child graphs"): its operations as they are now, which the new graph replays; the new
        graph also keeps this one's callbacks and buffers (this one may be closed).

        Raises:
            WrongContextError: the stream belongs to another context.
            NotSupportedError: the stream is capturing and the graph allocates or has
                conditionals (the capture goes on).
        """
        if type(stream) is not Stream:
            stream = _as_stream(stream, self._ctx)
        if not stream._h or not stream._ctx._h:
            raise stream._closed_error()
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        keeps = _capture_keeps(stream) if self._keep is not None else None
        status = _f_graph_launch(self._c, stream._c)
        if status:
            raise _err(status, self._ctx)
        if keeps is not None:
            # Recorded, not run: the captures' graphs replay this graph's callbacks and copies.
            for keep in keeps:
                keep.items.append(self._keep)
        else:
            self._launched.add(stream)

    def upload(self, stream: Stream) -> None:
        """Prepare the replays on ``stream`` ahead of the first ``launch`` (``qd_graph_upload``,
        as ``cuGraphUpload``), so that the first launch costs what later ones do. Ordered on
        ``stream`` like a launch; a launch on any stream afterwards uses it, and gives the same
        results as without it. On the CPU backend it only makes the pooled events a replay
        takes (cheap). Calling it again does nothing more.

        Raises:
            WrongContextError: the stream belongs to another context.
            InvalidOperationError: the stream is capturing (the capture goes on).
            NotSupportedError: the CUDA driver lacks cuGraphUpload (before CUDA 11.1).
        """
        if type(stream) is not Stream:
            stream = _as_stream(stream, self._ctx)
        if not stream._h or not stream._ctx._h:
            raise stream._closed_error()
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _C.qd_graph_upload(self._h, stream._h)
        if status:
            raise _err(status, self._ctx)

    def debug_dot(self, path: Union[str, "os.PathLike[str]"], *, verbose: bool = False) -> None:
        """Write the graph to ``path`` as a Graphviz DOT digraph (``qd_graph_debug_dot``, as
        ``cuGraphDebugDotPrint``), from the operations qd recorded at capture, on every
        backend: a cluster per stream ("lane N"), a node per operation (kernel name, grid and
        block; bytes of copies, sets and allocations; records and waits), the lanes' order, and
        the fork, join and event edges; a conditional's bodies as clusters. ``verbose`` adds
        argument sizes and addresses (``QD_GRAPH_DOT_VERBOSE``). The file is written whole.

        Raises:
            InvalidArgumentError: path is empty, a directory or special file, or cannot be
                written.
        """
        raw = os.fsencode(path)
        if not isinstance(verbose, bool):
            raise InvalidArgumentError(f"verbose must be a bool, not {verbose!r}")
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        flags = _api.QD_GRAPH_DOT_VERBOSE if verbose else 0
        status = _C.qd_graph_debug_dot(self._h, raw, flags)
        if status:
            raise _err(status, self._ctx)

    @property
    def kernel_node_count(self) -> int:
        """The graph's kernel nodes (``qd_graph_kernel_node_count``): its launches in the order
        they were queued during the capture (a ``launch_parallel``'s tasks in task order),
        numbered from 0; launches inside a conditional's body are not among them."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        out = c_uint32()
        status = _C.qd_graph_kernel_node_count(self._h, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return out.value

    def set_kernel_args(self, node: int, *args: Any) -> None:
        """Rebind kernel node ``node`` (``qd_graph_set_kernel_args``): every later replay runs
        that launch with ``args`` (packed as ``Kernel.launch`` packs them and copied before
        this returns); replays already queued keep their values. The number of arguments and
        each one's size must be the captured launch's.

        Raises:
            InvalidArgumentError: ``node`` is not below ``kernel_node_count``; another count or
                size of arguments than the captured launch's.
            NotSupportedError: the driver cannot rebind a node of its graph (a HIP runtime
                without the kernel-node functions qd.h names).
        """
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"node must be an int in [0, 2**32), not {node!r}")
        if args:
            arr, values = _pack_args(args, self._ctx)
            status = _f_set_kernel_args(self._c, _lib.U32(node), _ref(arr), _lib.U32(len(values)))
        else:
            status = _f_set_kernel_args(self._c, _lib.U32(node), _lib.NULL, _lib.U32(0))
        if status:
            raise _err(status, self._ctx)

    def update(self, other: "Graph") -> None:
        """Later replays of this graph use ``other``'s values (``qd_graph_update``): a capture
        of the same calls, in the same order on the same streams, with other arguments. This
        graph then keeps ``other``'s callbacks and buffers too (``other`` may be closed).

        Raises:
            InvalidOperationError: the shapes differ.
            WrongContextError: the graphs belong to different contexts.
        """
        if not isinstance(other, Graph):
            raise HandleTypeError(f"update() takes a qd.Graph, not {type(other).__name__}")
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if not other._h or not other._ctx._h:
            raise other._closed_error()
        status = _C.qd_graph_update(self._h, other._h)
        if status:
            raise _err(status, self._ctx)
        keep, self._keep = self._keep, other._keep
        launched, self._launched = self._launched, set()
        _retire(self._ctx, keep, launched)


def _retire(ctx: "Context", keep: Optional[_Keep], launched: Set[Stream]) -> None:
    """Let go of ``keep`` once the replays queued on ``launched`` have run: a host callback
    queued after them on each of those streams drops it. A stream that cannot take one (closed,
    capturing, or refused) leaves it to the context: the next Context.synchronize, or the
    context's destroy, lets go of it."""
    if keep is None or not launched or not ctx._h:
        return
    holder: List[Any] = [keep]
    tokens: List[None] = [None] * len(launched)

    def done() -> None:
        try:
            tokens.pop()
        except IndexError:
            pass
        if not tokens:
            holder.clear()

    fallback = False
    for stream in launched:
        if stream._h and _capture_keeps(stream) is None:
            if not _enqueue(stream, done, ctx._cb_errors):
                continue
        fallback = True
        done()
    if fallback:
        ctx._held.retired.append(keep)


def _new_graph(ctx: "Context") -> Graph:
    g = object.__new__(Graph)
    g._h = g._key = 0
    g._c = _C_ZERO
    g._ctx = ctx
    g._pending = True
    g._keep = None
    g._launched = set()
    ctx._held.graphs.add(g)
    return g


class Capture(_NoCopy):
    """The context manager of ``Stream.capture()``: begins the capture on entry and returns
    the (still empty) Graph; ends it on exit and fills the Graph. If the block raised, the
    capture is ended and its graph destroyed, and the block's exception propagates."""

    __slots__ = ("_stream", "_graph", "_entry")

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._graph: Optional[Graph] = None
        self._entry: Any = None

    def __enter__(self) -> Graph:
        s = self._stream
        s._check()
        status = _C.qd_stream_begin_capture(s._h)
        if status:
            raise _err(status, s._ctx)
        self._entry = (s._h, _Keep())
        s._ctx._held.captures.append(self._entry)
        self._graph = _new_graph(s._ctx)
        return self._graph

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        g = self._graph
        assert g is not None
        s = self._stream
        if not s._ctx._h:
            if exc_type is None:
                raise ObjectClosedError(
                    "the qd.Context of this capture was closed inside the `with "
                    "stream.capture()` block: the capture and its graph are gone")
            return
        try:
            _end(s, g, self._entry)
        except BaseException:
            if exc_type is None:
                raise
            return  # the block's own exception is the one to see
        if exc_type is not None:
            g.close()


def _end(s: Stream, g: Graph, entry: Any) -> None:
    """qd_stream_end_capture into ``g``. On an error (a fork not joined back) the stream stays
    capturing, as in C: join the stream the message names, then call ``Stream.end_capture()``."""
    if not s._h:
        raise s._closed_error()
    out = c_uint64()
    status = _C.qd_stream_end_capture(s._h, _ref(out))
    captures = s._ctx._held.captures
    if status:
        exc = _err(status, s._ctx)
        if entry is not None and _f_stream_query(s._c) != Status.ERROR_INVALID_OPERATION:
            _forget(captures, entry)  # the capture is over all the same (no graph)
        raise exc
    if entry is not None:
        _forget(captures, entry)
    g._pending = False
    g._h = g._key = out.value
    g._c = _H(out.value)
    g._keep = entry[1] if entry is not None else None


def _forget(captures: List[Any], entry: Any) -> None:
    try:
        captures.remove(entry)
    except ValueError:
        pass


def end_capture(s: Stream) -> Graph:
    """``Stream.end_capture()``: end a capture whose ``with`` block could not end it."""
    s._check()
    g = _new_graph(s._ctx)
    entry = next((e for e in s._ctx._held.captures if e[0] == s._h), None)
    _end(s, g, entry)
    return g
