"""Timelines: a 64-bit counter that only grows, signalled and waited on by streams and the host
(qd.h, "Timelines").

::

    tl = ctx.create_timeline()           # qd_timeline_create (initial value 0)
    a.signal(tl, 1)                      # qd_timeline_signal: once a's work so far is done
    b.wait(tl, 1)                        # qd_timeline_wait: b's later work waits for 1
    tl.signal(2)                         # qd_timeline_host_signal
    tl.wait(2, timeout=1.0)              # qd_timeline_host_wait: True, or False at the timeout
    tl.value                             # qd_timeline_query
    tl.close()                           # qd_timeline_destroy: queued signals still complete
"""

from __future__ import annotations

from ctypes import c_uint64
from typing import TYPE_CHECKING, Any, Optional

from . import _lib
from ._lib import H as _H, U64 as _U64, ref as _ref
from ._errors import ArgumentRangeError, ArgumentTypeError, ObjectClosedError, Status
from ._base import _err
from ._stream import _ContextChild, _with_context

if TYPE_CHECKING:
    from ._context import Context
    from ._stream import Stream

__all__ = ["Timeline"]

_f_destroy = _lib.raw("qd_timeline_destroy")
_f_signal = _lib.raw("qd_timeline_signal")
_f_wait = _lib.raw("qd_timeline_wait")
_f_host_signal = _lib.raw("qd_timeline_host_signal")
_f_host_wait = _lib.raw("qd_timeline_host_wait")
_f_query = _lib.raw("qd_timeline_query")

_U64_MAX = (1 << 64) - 1


def _value(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"a timeline value is an int, not {type(value).__name__}")
    if not 0 <= value <= _U64_MAX:
        raise ArgumentRangeError(f"a timeline value is 0 .. 2**64 - 1, not {value}")
    return value


class Timeline(_ContextChild):
    """A timeline of a context (``Context.create_timeline``): a 64-bit counter that only grows.

    Streams signal and wait on it with ``Stream.signal(timeline, value)`` and
    ``Stream.wait(timeline, value)`` (a wait may be queued before the signal that satisfies
    it); the host with ``signal(value)``, ``wait(value, timeout=...)`` and ``value``. Each
    signal's value must be above every value signalled or queued before it (else qd raises
    InvalidArgumentError and nothing is queued)."""

    __slots__ = ("_h", "_c", "_key", "_ctx", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make timelines with Context.create_timeline()")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._h:#x}"
        return f"<qd.Timeline {state}>"

    def _closed_error(self) -> ObjectClosedError:
        return ObjectClosedError(f"this qd.Timeline (handle {self._key:#x}) was closed"
                                 f"{_with_context(self)}")

    _destroy = staticmethod(_f_destroy)

    def close(self) -> None:
        """Destroy the timeline (``qd_timeline_destroy``); returns at once: signals already
        queued still complete, and a queued wait no signal will reach is released. Idempotent."""
        self._close()

    @property
    def value(self) -> int:
        """The counter now (``qd_timeline_query``)."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        out = c_uint64()
        status = _f_query(self._c, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return int(out.value)

    def signal(self, value: int) -> None:
        """Signal from the host (``qd_timeline_host_signal``): the counter becomes ``value``
        now, releasing the waits it satisfies."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _f_host_signal(self._c, _U64(_value(value)))
        if status:
            raise _err(status, self._ctx)

    def wait(self, value: int, *, timeout: Optional[float] = None) -> bool:
        """Block until the counter reaches ``value`` (``qd_timeline_host_wait``): True when it
        did, False when ``timeout`` seconds passed first (``None``: no limit; 0: only look).
        A destroyed timeline or context, or a lost context, raises (never hangs)."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if timeout is None:
            ns = _U64_MAX
        else:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise ArgumentTypeError(f"timeout is seconds, not {type(timeout).__name__}")
            if timeout < 0:
                raise ArgumentRangeError(f"timeout must not be negative, not {timeout}")
            ns = min(int(timeout * 1e9), _U64_MAX - 1)
        status = _f_host_wait(self._c, _U64(_value(value)), _U64(ns))
        if status == Status.NOT_READY:
            return False
        if status:
            raise _err(status, self._ctx)
        return True


def _new_timeline(ctx: "Context", handle: int) -> Timeline:
    tl = Timeline.__new__(Timeline)
    tl._h = tl._key = handle
    tl._c = _H(handle)
    tl._ctx = ctx
    return tl


def _stream_signal(stream: "Stream", timeline: Timeline, value: int) -> None:
    if not isinstance(timeline, Timeline):
        raise ArgumentTypeError(f"signal() takes a qd.Timeline, not {type(timeline).__name__}")
    if not timeline._h or not timeline._ctx._h:
        raise timeline._closed_error()
    status = _f_signal(stream._c, timeline._c, _U64(_value(value)))
    if status:
        raise _err(status, stream._ctx)


def _stream_wait(stream: "Stream", timeline: Timeline, value: int) -> None:
    if not timeline._h or not timeline._ctx._h:
        raise timeline._closed_error()
    status = _f_wait(stream._c, timeline._c, _U64(_value(value)))
    if status:
        raise _err(status, stream._ctx)
