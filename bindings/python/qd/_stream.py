"""Stream and Event, and what every object a context owns answers alike (_ContextChild)."""

from __future__ import annotations

import enum
import operator
from ctypes import (
    byref,
    c_float,
    c_int32,
    c_uint32,
    c_uint64,
)
from typing import (
    TYPE_CHECKING,
    Any,
    Iterable,
    List,
    Optional,
    Tuple,
    Union,
)

from . import _api, _lib
from ._lib import C as _C, H as _H, ref as _ref
from ._errors import (
    ArgumentTypeError,
    HandleTypeError,
    InvalidArgumentError,
    NotSupportedError,
    ObjectClosedError,
    PoolExhaustedError,
    Status,
)
from ._base import (
    Backend, _C_ZERO, _MAX_POOL, _NoCopy, _err, _index, _f_event_destroy, _f_event_query,
    _f_event_record, _f_event_sync, _f_release, _f_stream_destroy, _f_stream_query, _f_stream_sync,
    _f_stream_wait, _stream_type_error, _u32, _u64,
)
from ._callbacks import _check_callback_errors

if TYPE_CHECKING:
    from ._context import Context
    from ._timeline import Timeline

# qd._speedups (see _lib.SPEEDUPS): a lease's release without a foreign call; Stream.record, and
# the fields and finalizer of the Event it makes (EventBase), in C.
_SP = _lib.SPEEDUPS
_sp_release = _SP.release if _SP is not None else None  # type: ignore[attr-defined]
# All three or none: EventBase's finalizer needs what bind_record hands the module.
_EventBase: Any = None
_StreamBase: Any = None
if _SP is not None and all(hasattr(_SP, n) for n in ("EventBase", "StreamBase", "bind_record")):
    _EventBase, _StreamBase = _SP.EventBase, _SP.StreamBase  # type: ignore[attr-defined]


def _stream_c(stream: Any, ctx: Optional["Context"] = None) -> c_uint64:
    """The c_uint64 of an open stream, or the error (``stream=`` of every scheduling call).
    With ``ctx`` (a call whose kernel, event or buffer names its context), an object with
    ``__cuda_stream__`` is accepted too (see _foreign_stream)."""
    if isinstance(stream, Stream):
        if stream._h and stream._ctx._h:
            return stream._c
        raise stream._closed_error()
    return _as_stream(stream, ctx)._c


def _as_stream(stream: Any, ctx: Optional["Context"]) -> "Stream":
    """``stream=`` as a Stream: a qd Stream, or (with ``ctx``) a foreign CUDA stream."""
    if isinstance(stream, Stream):
        stream._check()
        return stream
    if stream is not None and hasattr(type(stream), "__cuda_stream__"):
        if ctx is None:
            raise HandleTypeError(
                f"stream= is a {type(stream).__name__} (a foreign CUDA stream), and this call "
                "has no kernel, event or qd buffer to tell which qd.Context to import it into: "
                "pass qd.Stream.from_external(ctx, stream)")
        return _foreign_stream(ctx, stream)
    raise _stream_type_error(stream)


def _foreign_stream(ctx: "Context", obj: Any) -> "Stream":
    """The borrowed qd stream of a foreign CUDA stream (an object with ``__cuda_stream__``)
    in ``ctx``: imported on first use, then cached per native stream. The cache holds no
    reference to ``obj`` (it is consulted only through a live object's own handle), and keeps
    at most 64 streams, forgetting the oldest."""
    ctx._check_open()
    native = _cuda_stream_handle(obj)
    cache = ctx._foreign
    s = cache.get(native)
    if s is not None and s._h:
        return s
    s = _import_stream(ctx, native, None)
    if len(cache) >= 64:
        cache.pop(next(iter(cache))).close()  # forget only: the native stream lives on
    cache[native] = s
    return s


def _cuda_stream_handle(obj: Any) -> int:
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is None:
        raise ArgumentTypeError(
            f"{type(obj).__name__} does not implement __cuda_stream__ (the CUDA stream "
            "protocol)")
    result = proto() if callable(proto) else proto
    try:
        ver, native = result
    except (TypeError, ValueError):
        raise ArgumentTypeError(
            f"__cuda_stream__ must return (version, handle), not {result!r}") from None
    # Each element's Python type first (ArgumentTypeError), then its value.
    ver = _index(ver, "the version of __cuda_stream__'s (version, handle)")
    native = _index(native, "the handle of __cuda_stream__'s (version, handle)")
    if ver != 0:
        raise InvalidArgumentError(f"unsupported __cuda_stream__ protocol version {ver}")
    return _u64(native, "native stream")


def _import_stream(ctx: "Context", native: int, owner: Any) -> "Stream":
    out = c_uint64()
    status = _C.qd_stream_import(ctx._h, native, _ref(out))
    if status:
        raise _err(status, ctx)
    return _new_stream(ctx, out.value, _BORROWED, owner=owner)


# ----------------------------------------------------------------------------------------------
# Streams
# ----------------------------------------------------------------------------------------------


class _ContextChild(_NoCopy):
    """What every object a context owns (Stream, Event, Module, Kernel, Graph) answers alike.

    Open means both handles are: the object's own ``_h`` (0 once it was closed) and its
    context's (0 once the context was closed, which destroyed every child in C). Every method
    that calls C tests both first (``if not self._h or not self._ctx._h``) and raises the
    object's ``_closed_error()``; ``close()`` and the finalizer of a child whose context was
    closed only forget the handle. The context never walks its children: its own ``_h`` is
    the one fact they consult, so a child made by another thread while the context closes is
    closed all the same, and the context keeps no list of its children."""

    __slots__ = ()

    @property
    def handle(self) -> int:
        """The qd handle (0 once closed, also by closing its context)."""
        return self._h if self._ctx._h else 0  # type: ignore[attr-defined]

    @property
    def context(self) -> "Context":
        """The context the object belongs to."""
        return self._ctx  # type: ignore[attr-defined]

    @property
    def closed(self) -> bool:
        """Whether the object was closed (destroyed, released, unloaded, or its context closed)."""
        return not self._h or not self._ctx._h  # type: ignore[attr-defined]

    # Lifetime shared by Event, Module and Kernel (Stream has its own: what close() does depends
    # on its kind). A subclass names its destroy call in _destroy and says what close() means in
    # its own close() docstring.
    _destroy: Any = None

    def _after_close(self) -> None:
        """Invalidate what dies with this object (a module's kernels)."""

    def _close(self) -> None:
        if not self._h:  # type: ignore[attr-defined]
            return
        if not self._ctx._h:  # type: ignore[attr-defined]  # destroyed with its context
            self._h = 0
            self._c = _C_ZERO
            self._after_close()
            return
        status = type(self)._destroy(self._c)  # type: ignore[attr-defined]
        self._h = 0
        self._c = _C_ZERO
        self._after_close()
        if status and status != Status.ERROR_INVALID_HANDLE:
            raise _err(status, self._ctx)  # type: ignore[attr-defined]

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()  # type: ignore[attr-defined]

    def __del__(self) -> None:
        try:
            if self._h:  # type: ignore[attr-defined]
                self._h = 0
                if self._ctx._h:  # type: ignore[attr-defined]  # (else destroyed with it)
                    type(self)._destroy(self._c)  # type: ignore[attr-defined]
        except BaseException:
            pass


def _with_context(obj: Any) -> str:
    """The end of a closed object's message: who closed it, when it was its context."""
    return " with its qd.Context" if obj._h and not obj._ctx._h else ""


class StreamKind(enum.Enum):
    """What a Stream wrapper owns, which decides what ``close()`` does."""

    OWNED = "owned"  #: qd_stream_create; close() destroys it
    LEASED = "leased"  #: from the pool; close() releases it
    BORROWED = "borrowed"  #: qd_stream_import; close() forgets it, the native stream lives on
    DEFAULT = "default"  #: the context's default stream; close() does nothing
    VIEW = "view"  #: a handle set active by other code; close() does nothing


_OWNED, _LEASED, _BORROWED = StreamKind.OWNED, StreamKind.LEASED, StreamKind.BORROWED


# With qd._speedups, Stream's fields live in its compiled base StreamBase, which also carries the
# compiled record (see the module's end); without it, in __slots__.
_STREAM_BASES: Tuple[type, ...] = (
    (_StreamBase, _ContextChild) if _StreamBase is not None else (_ContextChild,))


class Stream(*_STREAM_BASES):  # type: ignore[misc]
    """A qd stream: an in-order queue of work; different streams run concurrently.

    Make one with ``Context.create_stream`` (owned), ``Context.acquire_stream`` (a pool lease),
    ``Stream.fork`` (leases), ``Stream.from_external`` (borrowed), or get the context's
    ``default_stream``. Pass it as ``stream=`` to every call that schedules work.

    ``with`` on an owned, borrowed or default stream synchronizes it at the end of the block,
    then closes it; on a lease it only releases it (work already queued still completes).
    When the block raises, nothing is synchronized: the stream is closed at once (its work
    still completes).
    """

    __slots__ = (("__weakref__",) if _StreamBase is not None else  # (StreamBase has the rest)
                 ("_h", "_c", "_key", "_ctx", "_kind", "_owner", "__weakref__"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make streams with Context.create_stream(), Context.acquire_stream(), "
                        "Stream.fork() or Stream.from_external()")

    # -- identity ---------------------------------------------------------------------------

    @property
    def kind(self) -> StreamKind:
        """What this wrapper owns (StreamKind), which decides what ``close()`` does."""
        return self._kind

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._h:#x}"
        return f"<qd.Stream {self._kind.value} {state}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def _closed_error(self) -> ObjectClosedError:
        if self._h and not self._ctx._h:
            return ObjectClosedError(
                f"this qd.Stream (handle {self._key:#x}) was closed with its qd.Context")
        what = {_LEASED: "released"}.get(self._kind, "closed")
        return ObjectClosedError(f"this qd.Stream (handle {self._key:#x}) was {what}")

    def _check(self) -> None:
        if not self._h or not self._ctx._h:
            raise self._closed_error()

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy (owned), release (lease) or forget (borrowed) the stream. Returns at once;
        queued work still completes. Idempotent; does nothing on default-stream wrappers."""
        if not self._h:
            return
        if self._kind is _LEASED and self._ctx._h:  # the fast path
            status = _sp_release(self._h) if _SP is not None else _f_release(self._c)
            self._h = 0
            self._c = _C_ZERO
            if status and status != Status.ERROR_INVALID_HANDLE:
                raise _err(status, self._ctx)
            return
        if not self._ctx._h:  # destroyed with its context: nothing left to destroy
            self._h = 0
            self._c = _C_ZERO
            self._owner = None
            return
        kind = self._kind
        if kind is _LEASED:
            status = _f_release(self._c)
        elif kind is _OWNED or kind is _BORROWED:
            status = _f_stream_destroy(self._c)
            self._owner = None
        else:
            return  # default stream / view: owns nothing
        self._h = 0
        self._c = _C_ZERO
        if status and status != Status.ERROR_INVALID_HANDLE:
            raise _err(status, self._ctx)

    release = close

    def __enter__(self) -> "Stream":
        self._check()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None or self._kind is _LEASED:
            try:
                self.close()
            except Exception:
                if exc_type is None:
                    raise
            return
        try:
            if self._h and self._ctx._h:
                self.synchronize()
        finally:
            self.close()

    def __del__(self) -> None:
        try:
            h = self._h
            if h and self._ctx._h:  # (a closed context destroyed it)
                kind = self._kind
                if kind is _OWNED or kind is _BORROWED:
                    self._h = 0
                    _f_stream_destroy(self._c)
                elif kind is _LEASED:
                    self._h = 0
                    if _SP is not None:
                        _sp_release(h)
                    else:
                        _f_release(self._c)
        except BaseException:
            pass

    # -- work -------------------------------------------------------------------------------

    def synchronize(self) -> None:
        """Block until all work queued on the stream so far has completed.

        Raises:
            CallbackError: a Python host callback / host kernel of this context raised.
            DeviceLostError: the context was lost (e.g. a host kernel returned non-zero).
        """
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _f_stream_sync(self._c)
        if status:
            raise _err(status, self._ctx)
        if self._ctx._cb_errors:
            _check_callback_errors(self._ctx)

    sync = synchronize

    def query(self) -> bool:
        """True if all work queued on the stream has completed (never blocks)."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _f_stream_query(self._c)
        if status == 0:
            return True
        if status == Status.NOT_READY:
            return False
        raise _err(status, self._ctx)

    @property
    def is_done(self) -> bool:
        """Same as ``query()``."""
        return self.query()

    def wait(self, event: Union["Event", "Stream", "Timeline"],
             value: Optional[int] = None) -> None:
        """Make later work on this stream wait, without blocking the host:

        - for an Event: for its most recent record (``qd_stream_wait_event``);
        - for a Stream: for all work queued on that stream so far (PyTorch's ``wait_stream``):
          a pooled event of that stream's context is recorded on it and waited for;
        - for a Timeline and a value: until the timeline's counter reaches ``value``
          (``qd_timeline_wait``; the signal may be queued later).

        The event or stream may belong to another context of the same backend (another GPU:
        qd orders work across devices this way, without a host synchronization).

        Raises:
            WrongContextError: the event or stream belongs to a context of another backend.
        """
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if value is not None or type(event).__name__ == "Timeline":
            from ._timeline import Timeline, _stream_wait

            if not isinstance(event, Timeline) or value is None:
                raise HandleTypeError("wait(timeline, value) takes a qd.Timeline and an int")
            _stream_wait(self, event, value)
            return
        if isinstance(event, Stream):
            self._wait_stream(event)
            return
        if not isinstance(event, Event):
            raise HandleTypeError(
                f"wait() takes a qd.Event or a qd.Stream, not {type(event).__name__}")
        if not event._h or not event._ctx._h:
            raise event._closed_error()
        status = _f_stream_wait(self._c, event._c)
        if status:
            raise _err(status, self._ctx)

    def _wait_stream(self, other: "Stream") -> None:
        other._check()
        ctx = other._ctx  # the record is made on `other`, with an event of its context
        pool = ctx._wait_events
        try:
            ev = pool.pop()  # atomic under the GIL: no two threads share one event
        except IndexError:
            ev = ctx.create_event()
        status = _f_event_record(other._c, ev._c)
        if not status:
            status = _f_stream_wait(self._c, ev._c)
        # The wait captured the record current at the call, so the event is free again.
        pool.append(ev)
        if status:
            raise _err(status, ctx)

    def signal(self, timeline: "Timeline", value: int) -> None:
        """Signal ``timeline`` once the work queued on this stream so far has completed
        (``qd_timeline_signal``): its counter becomes ``value``, which must be above every
        value signalled or queued on it before (else InvalidArgumentError, nothing queued)."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        from ._timeline import _stream_signal

        _stream_signal(self, timeline, value)

    def record(self, *, timing: bool = False) -> "Event":
        """A new Event recorded on this stream (``qd_event_record``): it completes when all
        work queued here so far has completed (cuda.core's and CuPy's ``record``).
        ``timing=True`` makes it usable with ``Event.elapsed_ms``.

        The event comes from the context's pool of record events (``qd_event_create`` only
        when it is empty), and goes back to it, instead of being destroyed, when it is closed
        or collected: a wait already queued on it keeps the record it saw (qd.h).

        (With qd._speedups, ``Stream.record`` is its compiled twin, which does the same and
        hands what it does not take to this one or to ``_record``.)"""
        return _record(self, timing)

    def capture(self) -> Any:
        """Capture the work queued on this stream (and on the streams forked from it) into a
        graph instead of running it (qd.h, "Graphs")::

            with stream.capture() as graph:
                kernel.launch(x, stream=stream)
            graph.launch(stream=stream)

        The capture begins on entry and ends on exit; the graph is usable after the block.
        Inside it, ``synchronize``/``query`` of the stream, allocation on it and waits on
        events recorded outside the capture raise InvalidOperationError.
        """
        from ._graph import Capture

        return Capture(self)

    def begin_conditional(self, kind: int, *, condition: int, num_cases: int = 0) -> None:
        """Open a conditional on this capturing stream (``qd_stream_begin_conditional``; qd.h,
        "Conditionals"): the work queued here from now on is its first body. ``kind`` is
        ``qd.CONDITIONAL_IF``, ``_IF_ELSE``, ``_WHILE`` or ``_SWITCH`` (with ``num_cases``);
        ``condition`` is the address of the uint32 word the graph's kernels write (memory of
        the context). Close it with ``end_conditional`` (``next_branch`` between an IF_ELSE's or
        a SWITCH's bodies), or use ``with stream.conditional(...)``. CPU contexts in this
        release (a GPU context's capture raises NotSupportedError)."""
        self._check()
        d = _api.ConditionalDesc()
        d.kind = kind
        d.num_cases = num_cases
        d.condition = condition
        status = _C.qd_stream_begin_conditional(self._h, _ref(d))
        if status:
            raise _err(status, self._ctx)

    def next_branch(self) -> None:
        """Close the current body of the innermost conditional open on this stream and open its
        next one: an IF_ELSE's else body, a SWITCH's next case (``qd_stream_next_branch``)."""
        self._check()
        status = _C.qd_stream_next_branch(self._h)
        if status:
            raise _err(status, self._ctx)

    def end_conditional(self) -> None:
        """Close the innermost conditional open on this stream: later work follows all of it
        (``qd_stream_end_conditional``)."""
        self._check()
        status = _C.qd_stream_end_conditional(self._h)
        if status:
            raise _err(status, self._ctx)

    def conditional_handle(self) -> int:
        """The native handle of the innermost conditional open on this stream
        (``qd_conditional_handle``), for kernels that set its value themselves; raises
        NotSupportedError where the capture is not a CUDA driver graph."""
        self._check()
        out = c_uint64()
        status = _C.qd_conditional_handle(self._h, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return out.value

    def conditional(self, kind: int, *, condition: int, num_cases: int = 0) -> Any:
        """``with stream.conditional(qd.CONDITIONAL_WHILE, condition=word):``: the block's work
        is the conditional's body (``begin_conditional`` on entry, ``end_conditional`` on
        exit; call ``next_branch`` inside for an IF_ELSE's or a SWITCH's next body)."""
        return _ConditionalScope(self, kind, condition, num_cases)

    def end_capture(self) -> Any:
        """End the capture of this stream and return its qd.Graph (``qd_stream_end_capture``).
        Only needed after ``with stream.capture()`` raised InvalidOperationError because a
        forked stream had not joined back: the stream is then still capturing; join that
        stream, then call this."""
        from ._graph import end_capture

        return end_capture(self)

    def fork(self, n: int) -> List["Stream"]:
        """Lease ``n`` streams from the pool, each waiting for the work queued on this stream
        so far (``qd_stream_fork``; events, no host sync). Give them back with ``join``.

        Raises:
            PoolExhaustedError: fewer than ``n`` streams are free (nothing stays leased).
        """
        self._check()
        count = _u32(n, "n")
        if count > _MAX_POOL:
            raise PoolExhaustedError(
                f"n = {count} exceeds the largest possible stream pool ({_MAX_POOL})")
        children = (c_uint64 * count)()
        status = _C.qd_stream_fork(self._h, count, _ref(children))
        if status:
            raise _err(status, self._ctx)
        ctx = self._ctx
        return [_new_stream(ctx, h, _LEASED) for h in children]

    def join(self, children: Iterable["Stream"]) -> None:
        """Make this stream wait for all work queued on each child, then release every child
        to the pool (``qd_stream_join``). On an error nothing changes.

        Raises:
            InvalidOperationError: a child is not a pool lease.
            InvalidArgumentError: no children, a child twice, or this stream among them.
        """
        self._check()
        kids = list(children)
        for child in kids:
            if not isinstance(child, Stream):
                raise HandleTypeError(
                    f"children must be qd.Stream leases, not {type(child).__name__}")
            child._check()
        arr = (c_uint64 * len(kids))(*[child._h for child in kids])
        status = _C.qd_stream_join(self._h, _ref(arr), len(kids))
        if status:
            raise _err(status, self._ctx)
        for child in kids:
            child._h = 0
            child._c = _C_ZERO

    @property
    def priority(self) -> int:
        """The priority applied after clamping (``qd_stream_get_priority``)."""
        self._check()
        out = c_int32()
        status = _C.qd_stream_get_priority(self._h, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return out.value

    @property
    def is_capturing(self) -> bool:
        """Whether the stream is capturing (``qd_stream_is_capturing``): the origin of an open
        capture or a stream that joined one (a forked child, a stream that waited on an event
        recorded in it). Queues nothing, so it may be asked in the middle of a capture."""
        self._check()
        out = c_int32()
        status = _C.qd_stream_is_capturing(self._h, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return bool(out.value)

    @property
    def flags(self) -> int:
        """The ``qd_stream_flags`` the stream was created with (``qd_stream_get_flags``): 1
        (``QD_STREAM_NON_BLOCKING``) when it was created ``non_blocking``, and for the default
        stream and pool leases; an imported stream's native ones."""
        self._check()
        out = c_uint32()
        status = _C.qd_stream_get_flags(self._h, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return out.value

    @property
    def non_blocking(self) -> bool:
        """Whether ``flags`` has ``STREAM_NON_BLOCKING``."""
        return bool(self.flags & _api.QD_STREAM_NON_BLOCKING)

    @property
    def native_handle(self) -> int:
        """The native stream (CUstream / hipStream_t) as an int (``qd_stream_native_handle``).

        Raises:
            NotSupportedError: the CPU backend has no native streams.
        """
        self._check()
        out = c_uint64()
        status = _C.qd_stream_native_handle(self._h, _ref(out))
        if status:
            raise _err(status, self._ctx)
        return out.value

    def __cuda_stream__(self) -> Tuple[int, int]:
        """The CUDA stream protocol (cuda.core, CuPy, PyTorch): ``(0, CUstream as int)``.

        Raises:
            NotSupportedError: the stream is not on the CUDA backend (the CPU backend has no
                native streams; a HIP stream is not a CUstream).
        """
        self._check()
        if self._ctx._backend is not Backend.CUDA:
            raise NotSupportedError(
                f"__cuda_stream__ needs a stream of a CUDA context; this one is on the "
                f"{self._ctx._backend.name} backend, which has no CUstream")
        return (0, self.native_handle)

    @classmethod
    def from_external(cls, ctx: Context, obj: Any) -> "Stream":
        """Import a foreign native stream as a borrowed qd stream (``qd_stream_import``); qd
        never destroys the native stream. ``obj`` is one of, in this order:

        - an object with ``__cuda_stream__`` (the CUDA stream protocol: cuda.core, current
          PyTorch and CuPy, a qd stream);
        - an ``int``: the raw native handle (a ``CUstream`` / ``hipStream_t`` as an integer),
          **borrowed**: nothing keeps the native stream alive, so the caller must keep it alive
          until this Stream is closed;
        - an object with an integer ``.cuda_stream`` (``torch.cuda.Stream`` of older PyTorch)
          or ``.ptr`` (``cupy.cuda.Stream`` of older CuPy).

        The returned Stream keeps ``obj`` alive (for the object forms) until it is closed.

        Raises:
            ArgumentTypeError: ``obj`` is none of these (a ``TypeError`` naming what is
                accepted); an int that does not fit 64 bits is an ``ArgumentRangeError``.
            NotSupportedError: ``ctx`` is a CPU context.
        """
        from ._context import Context  # (imported here: _context imports this module)

        if not isinstance(ctx, Context):
            raise HandleTypeError(f"ctx must be a qd.Context, not {type(ctx).__name__}")
        ctx._check_open()
        native, owner = _external_handle(obj)
        return _import_stream(ctx, native, owner)


_EXTERNAL_EXPECTED = (
    "an object with __cuda_stream__ (cuda.core, PyTorch, CuPy), a raw native stream handle as "
    "an int (borrowed), or an object with an int .cuda_stream (PyTorch) or .ptr (CuPy)")


def _external_handle(obj: Any) -> Tuple[int, Any]:
    """(native handle, object to keep alive) of what ``Stream.from_external`` accepts."""
    if hasattr(type(obj), "__cuda_stream__"):
        return _cuda_stream_handle(obj), obj
    if type(obj) is int:
        return _u64(obj, "native stream handle"), None
    if obj is None or isinstance(obj, (bool, float, str, bytes)):
        raise ArgumentTypeError(
            f"Stream.from_external takes {_EXTERNAL_EXPECTED}; not {type(obj).__name__}")
    for attr in ("cuda_stream", "ptr"):
        value = getattr(obj, attr, None)
        if value is not None and not isinstance(value, bool):
            try:
                return _u64(operator.index(value), f"{type(obj).__name__}.{attr}"), obj
            except TypeError:
                pass
    if hasattr(type(obj), "__index__"):  # an int-like raw handle (e.g. a numpy integer)
        return _u64(operator.index(obj), "native stream handle"), None
    raise ArgumentTypeError(
        f"Stream.from_external takes {_EXTERNAL_EXPECTED}; a {type(obj).__name__} is none of "
        "these")


_STREAM_NEW = object.__new__
_RECORD_POOL = 64  # record events (Stream.record) a context keeps for reuse, per kind
_EVENT_NEW = object.__new__


def _new_stream(ctx: Context, handle: int, kind: StreamKind, owner: Any = None) -> Stream:
    s = _STREAM_NEW(Stream)
    s._h = s._key = handle
    s._c = _H(handle)
    s._ctx = ctx
    s._kind = kind
    s._owner = owner
    return s


def _record(stream: Stream, timing: Any) -> "Event":
    """Stream.record: a pooled event of the stream's context recorded on it. qd._speedups'
    record does the same for an open stream, a bool ``timing`` and a pool that is not empty,
    and hands everything else here."""
    ctx = stream._ctx
    if not stream._h or not ctx._h:
        raise stream._closed_error()
    if timing is not False:
        timing = bool(timing)
    pool = ctx._record_events[timing]
    try:
        h, c = pool.pop()  # atomic under the GIL: no two calls take one event
    except IndexError:
        ev = ctx.create_event(timing=timing)
        c = ev._c
    else:
        ev = _EVENT_NEW(Event)
        ev._h = ev._key = h
        ev._c = c
        ev._ctx = ctx
        ev._timing = timing
    ev._pooled = pool
    status = _f_event_record(stream._c, c)
    if status:
        _record_failed(ev, status)
    return ev


def _record_failed(ev: "Event", status: int) -> None:
    """A record (of either path) failed: the event goes back to its pool, and the status's
    exception is raised (its message read first)."""
    exc = _err(status, ev._ctx)
    ev.close()
    raise exc


# ----------------------------------------------------------------------------------------------
# Events
# ----------------------------------------------------------------------------------------------


# With qd._speedups, Event's fields live in its compiled base, EventBase, whose finalizer is
# Event.__del__ below in C; without it, in __slots__. The behaviour is the same.
_EVENT_BASES: Tuple[type, ...] = (
    (_EventBase, _ContextChild) if _EventBase is not None else (_ContextChild,))


class Event(*_EVENT_BASES):  # type: ignore[misc]
    """A qd event: a completion marker recorded on a stream (``Context.create_event``).

    ``end - start`` (two timing events) is ``start.elapsed_ms(end)``.
    """

    # _pooled: the context's pool of record events this one goes back to (Stream.record), or
    # None (an event the caller created: close() destroys it).
    __slots__ = (("__weakref__",) if _EventBase is not None else
                 ("_h", "_c", "_key", "_ctx", "_timing", "_pooled", "__weakref__"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make events with Context.create_event()")

    def _give_back(self, h: int) -> bool:
        """A record event (Stream.record) goes back to its context's pool rather than being
        destroyed, while the pool has room; True if it did. (``__del__`` does the same inline.)"""
        pool = self._pooled  # the pool of its kind, or None: an event the caller created
        if pool is None or not self._ctx._h or len(pool) >= _RECORD_POOL:
            return False
        pool.append((h, self._c))
        return True

    if _EventBase is None:  # with qd._speedups: EventBase's finalizer, the same in C

        def __del__(self) -> None:
            try:
                h = self._h
                if h:
                    self._h = 0
                    if not self._ctx._h:
                        return  # destroyed with its context
                    pool = self._pooled
                    if pool is None or len(pool) >= _RECORD_POOL:
                        _f_event_destroy(self._c)
                    else:
                        pool.append((h, self._c))
            except BaseException:
                pass

    @property
    def timing(self) -> bool:
        """Whether the event records timestamps (created with ``timing=True``)."""
        return self._timing

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._h:#x}"
        return f"<qd.Event {'timing ' if self._timing else ''}{state}>"

    def _closed_error(self) -> ObjectClosedError:
        return ObjectClosedError(f"this qd.Event (handle {self._key:#x}) was closed"
                                 f"{_with_context(self)}")

    _destroy = staticmethod(_f_event_destroy)

    def close(self) -> None:
        """Destroy the event; returns at once, even if a record is pending. Idempotent. (An
        event of ``Stream.record()`` goes back to the context's pool instead.)"""
        if self._h and self._give_back(self._h):
            self._h = 0
            self._c = _C_ZERO
            return
        self._close()

    def record(self, *, stream: Stream) -> "Event":
        """Record the event on ``stream`` (required): it completes when all work queued on
        the stream so far has completed. Returns the event."""
        sc = _stream_c(stream, self._ctx)
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _f_event_record(sc, self._c)
        if status:
            raise _err(status, self._ctx)
        return self

    def query(self) -> bool:
        """True if the most recent record has completed (or it was never recorded)."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _f_event_query(self._c)
        if status == 0:
            return True
        if status == Status.NOT_READY:
            return False
        raise _err(status, self._ctx)

    @property
    def is_done(self) -> bool:
        """Same as ``query()``."""
        return self.query()

    def synchronize(self) -> None:
        """Block until the most recent record has completed."""
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        status = _f_event_sync(self._c)
        if status:
            raise _err(status, self._ctx)
        if self._ctx._cb_errors:
            _check_callback_errors(self._ctx)

    sync = synchronize

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event's completion to ``end``'s (``qd_event_elapsed_ms``).

        Raises:
            TimingDisabledError, NotRecordedError: see qd.h.
            NotReadyError: a record has not completed yet.
        """
        if not isinstance(end, Event):
            raise HandleTypeError(f"end must be a qd.Event, not {type(end).__name__}")
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if not end._h or not end._ctx._h:
            raise end._closed_error()
        ms = c_float()
        status = _C.qd_event_elapsed_ms(self._h, end._h, _ref(ms))
        if status:
            raise _err(status, self._ctx)
        return ms.value

    def __sub__(self, start: "Event") -> float:
        if not isinstance(start, Event):
            return NotImplemented
        return start.elapsed_ms(self)


# qd._speedups' Stream.record: StreamBase.record becomes Stream.record once bound; _py_record
# is the Python one, which the compiled one calls for a call of another shape.
_py_record = Stream.record


def _bind_record(slow: Any = _record, failed: Any = _record_failed) -> None:
    """Hand qd._speedups' record what it calls: libqd's functions, Event, the Python method,
    the Python path for what it does not take (``slow``) and for a failed record (``failed``)."""
    _SP.bind_record(  # type: ignore[union-attr]
        _lib.address("qd_event_record"), _lib.address("qd_event_destroy"), Event, _py_record,
        slow, failed, _RECORD_POOL)


if _StreamBase is not None:
    _bind_record()
    Stream.record = _StreamBase.record  # type: ignore[assignment,method-assign]


class _ConditionalScope:
    """``Stream.conditional``: opens the conditional on entry and closes it on exit. When the
    block raises, the conditional is closed if it can be and the block's exception goes on."""

    __slots__ = ("_stream", "_kind", "_condition", "_num_cases")

    def __init__(self, stream: Stream, kind: int, condition: int, num_cases: int) -> None:
        self._stream = stream
        self._kind = kind
        self._condition = condition
        self._num_cases = num_cases

    def __enter__(self) -> Stream:
        self._stream.begin_conditional(self._kind, condition=self._condition,
                                       num_cases=self._num_cases)
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._stream.end_conditional()
            return
        try:
            self._stream.end_conditional()
        except Exception:
            pass  # the block's own exception is the one to see
