"""Context, devices and the version, and the per-thread active stream."""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import warnings
import weakref
from ctypes import (
    byref,
    c_char_p,
    c_int32,
    c_uint32,
    c_uint64,
    c_void_p,
)
from dataclasses import dataclass
from typing import (
    Any,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _api, _lib
from ._lib import C as _C, H as _H, ref as _ref
from ._errors import (
    ArgumentTypeError,
    HazardWarning,
    NotFoundError,
    ObjectClosedError,
    Status,
)
from ._base import (
    Backend, _C_ZERO, _I32_MAX, _NoCopy, _I32_MIN, _backend, _err, _f_acquire, _f_ctx_destroy, _f_ctx_sync,
    _f_get_active, _f_set_active, _int, _stream_type_error, _u32, _u64,
)
from ._callbacks import (
    _Held, _check_callback_errors, _destroy_context, _drop_unrun, _warn_unreported,
)
from ._stream import (
    _BORROWED, _EVENT_NEW, _LEASED, _OWNED, _STREAM_NEW, Event, Stream, StreamKind, _new_stream,
)
from ._memory import HostBuffer
from ._kernel import Module
from ._trace import _new_context as _trace_new_context

# qd._speedups (see _lib.SPEEDUPS): acquire and the active stream without a foreign call.
_SP = _lib.SPEEDUPS
if _SP is not None:
    _sp_acquire = _SP.acquire  # type: ignore[attr-defined]
    _sp_set_active = _SP.set_active  # type: ignore[attr-defined]
    _sp_get_active = _SP.get_active  # type: ignore[attr-defined]


def version() -> Tuple[int, int, int]:
    """The loaded libqd's version as (major, minor, patch) (``qd_version``)."""
    v = _C.qd_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def device_count(backend: Union[Backend, str, int]) -> int:
    """Number of devices of a backend (``qd_device_count``; the CPU backend has 1).

    Raises:
        BackendUnavailableError: the backend is not built in, or its driver cannot be loaded.
    """
    count = c_uint32()
    status = _C.qd_device_count(_backend(backend), _ref(count))
    if status:
        raise _err(status)
    return count.value


@dataclass(frozen=True)
class DeviceProperties:
    """What ``qd_device_get_info`` reports about one device."""

    backend: Backend
    device: int
    name: str
    driver_version: int
    compute_capability: Tuple[int, int]
    multiprocessors: int
    total_memory: int
    #: (since 0.3) every count of ``Context.split`` is a multiple of it; 0: no partitions.
    split_granularity: int = 0
    #: (since 0.3) the smallest count of ``Context.split``.
    split_minimum: int = 0


def device_properties(backend: Union[Backend, str, int], device: int = 0) -> DeviceProperties:
    """Describe one device (``qd_device_get_info``)."""
    info = _lib.DeviceInfo()
    status = _C.qd_device_get_info(_backend(backend), _u32(device, "device"), _ref(info))
    if status:
        raise _err(status)
    return DeviceProperties(Backend(info.backend), info.device,
                            info.name.decode("utf-8", "replace"), info.driver_version,
                            (info.compute_major, info.compute_minor), info.multiprocessors,
                            info.total_memory, info.split_granularity, info.split_minimum)


# ----------------------------------------------------------------------------------------------
# Context
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextStatistics:
    """A snapshot of ``qd_context_stats`` (each counter exact; mutually consistent only when
    no other thread works on the context)."""

    live_streams: int
    live_events: int
    live_modules: int
    live_kernels: int
    stream_pool_capacity: int
    stream_pool_created: int
    stream_pool_leased: int
    stream_pool_hits: int
    stream_pool_misses: int
    event_pool_created: int
    event_pool_hits: int
    event_pool_misses: int
    live_allocations: int
    bytes_allocated: int
    host_bytes_allocated: int
    live_graphs: int = 0  # since 0.2
    hazards_reported: int = 0  # since 0.2: reports of the validation mode
    live_timelines: int = 0  # since 0.3: Context.create_timeline, not yet closed


#: qd_context_flags (qd.h): Context(validate=True) and validate="raise".
CONTEXT_VALIDATE = _api.QD_CONTEXT_VALIDATE
CONTEXT_VALIDATE_FAIL = _api.QD_CONTEXT_VALIDATE_FAIL

# The hazard handler: one C trampoline for the process; user_data is the context's handle.
# A context whose reports are warnings ("warn", or QD_VALIDATE=1) is in _hazard_sinks, with the
# list its unreported errors wait in; a "raise" one (validate="raise", or QD_VALIDATE=error) is
# not: its refused call raises HazardError with the report instead, and nothing is warned.
_hazard_sinks: Dict[int, List[BaseException]] = {}


def _hazard_trampoline(hazard: Any, user_data: Optional[int]) -> None:
    try:
        sink = _hazard_sinks.get(user_data or 0)
        if sink is None:
            return
        message = hazard.contents.message.decode("utf-8", "replace")
    except BaseException:  # interpreter shutdown
        return
    try:
        warnings.warn(message, HazardWarning, stacklevel=2)
    except BaseException as exc:  # a filter made it an error, which cannot cross C: the next
        try:  # synchronize() of the context raises it (as a callback's exception is reported)
            sink.append(exc)
        except BaseException:
            pass


def _raises_hazards(validate: Union[bool, str]) -> bool:
    """Whether the context refuses hazardous calls (validate="raise", or QD_VALIDATE=error when
    validate is left to the environment, as qd_context_create reads it)."""
    if validate:
        return validate == "raise"
    return os.environ.get("QD_VALIDATE", "") == "error"


_HAZARD = _lib.HazardFn(_hazard_trampoline)
# Never freed: C may call it until every context is gone.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_HAZARD))
_HAZARD_C = _lib.fnptr(_HAZARD, "qd_hazard_fn")


def _peer(peer: Any) -> "Context":
    if not isinstance(peer, Context):
        raise ArgumentTypeError(f"peer must be a qd.Context, not {type(peer).__name__}")
    peer._check_open()
    return peer


class Context(_NoCopy):
    """A qd context: one (backend, device) with its default stream, stream pool and event pool.

    ``with Context() as ctx:`` closes it at the end of the block. ``close()`` (and garbage
    collection, and interpreter exit) waits for all queued work, then destroys every stream,
    event, module and kernel of the context and frees its allocations.

    Args:
        backend: ``Backend`` or ``"cpu"``, ``"cuda"``, ``"hip"``, ``"default"`` (= CPU).
        device: device ordinal (0 on the CPU backend).
        stream_pool_size: most streams leased at once (0 = 32; at most 4096).
        event_pool_size: fork/join events kept for reuse (0 = 256).
        cpu_worker_threads: CPU backend worker threads (0 = max(2, cores); at most 256).
        validate: the validation mode (qd.h, "Validation"): ``True`` (or ``"warn"``) reports
            every unsynchronised cross-stream access, unsafe free and use after free as a
            ``qd.HazardWarning``; ``"raise"`` also refuses the offending call with
            ``qd.HazardError``. ``False`` leaves it to the environment (``QD_VALIDATE=1``
            turns it on for every context; its reports are then warnings too).

    Raises:
        InvalidArgumentError, BackendUnavailableError, OutOfMemoryError: see qd_context_create.
    """

    __slots__ = ("_h", "_c", "_backend", "_device", "_validate", "_default_h", "_tls",
                 "_cb_errors", "_keep", "_foreign", "_wait_events", "_record_events", "_held",
                 "_finalizer", "__weakref__")

    def __init__(self, backend: Union[Backend, str, int] = Backend.DEFAULT, device: int = 0, *,
                 stream_pool_size: int = 0, event_pool_size: int = 0,
                 cpu_worker_threads: int = 0, validate: Union[bool, str] = False) -> None:
        self._h = 0
        if validate not in (False, True, "warn", "raise"):
            raise ArgumentTypeError(
                f"validate must be False, True, 'warn' or 'raise', not {validate!r}")
        desc = _lib.ContextDesc()
        if validate:
            desc.flags = CONTEXT_VALIDATE | (CONTEXT_VALIDATE_FAIL if validate == "raise" else 0)
        desc.backend = _u32(_backend(backend), "backend")
        desc.device = _u32(device, "device")
        desc.stream_pool_size = _u32(stream_pool_size, "stream_pool_size")
        desc.event_pool_size = _u32(event_pool_size, "event_pool_size")
        desc.cpu_worker_threads = _u32(cpu_worker_threads, "cpu_worker_threads")
        out = c_uint64()
        status = _C.qd_context_create(_ref(desc), _ref(out))
        if status:
            raise _err(status)
        b = desc.backend
        self._adopt(out.value, Backend.CPU if b == Backend.DEFAULT else Backend(b), desc.device,
                    validate)

    def _adopt(self, handle: int, backend: "Backend", device: int,
               validate: Union[bool, str]) -> None:
        """Make this object the owner of the context ``handle`` (made by qd_context_create or
        qd_context_split); on an error the context is destroyed."""
        default = c_uint64()
        status = _C.qd_context_default_stream(handle, _ref(default))
        if status:
            exc = _err(status)
            _f_ctx_destroy(_H(handle))
            raise exc
        # Reports become warnings (validation on through flags or QD_VALIDATE; off, the call
        # says so with QD_ERROR_INVALID_OPERATION and nothing changes).
        _C.qd_context_set_hazard_handler(handle, _HAZARD_C, _lib.ptr(handle))
        self._h = handle
        self._c = _H(handle)
        self._backend = backend
        self._device = device
        self._validate = validate
        self._default_h = default.value
        self._tls = _ActiveRecord()
        #: Exceptions raised by Python host callbacks / host kernels, not reported yet.
        self._cb_errors: List[BaseException] = []
        #: ctypes callbacks (Python host kernels) C may call until the context is destroyed.
        self._keep: List[Any] = []
        #: Borrowed streams of foreign CUDA streams passed as stream= (native handle -> Stream).
        self._foreign: Dict[int, Stream] = {}
        #: Events Stream.wait(stream) records and waits on (each used by one call at a time).
        self._wait_events: List[Event] = []
        #: Record events (Stream.record) free for reuse, as (handle, c_uint64): (plain, timing).
        self._record_events: Tuple[List[Any], List[Any]] = ([], [])
        #: What graphs keep for their replays (captured callbacks, Python buffers of copies).
        self._held = _Held()
        if not _raises_hazards(validate):
            _hazard_sinks[handle] = self._cb_errors
        self._held.on_destroy = functools.partial(_hazard_sinks.pop, handle, None)
        self._finalizer = weakref.finalize(self, _destroy_context, handle, self._keep,
                                           self._cb_errors, self._held)
        try:
            _trace_new_context(self)  # inside a qd.trace block that covers every context
        except BaseException:
            self.close()
            raise

    # -- identity ---------------------------------------------------------------------------

    @property
    def handle(self) -> int:
        """The qd_context handle (0 once closed)."""
        return self._h

    @property
    def closed(self) -> bool:
        """Whether the context was closed."""
        return not self._h

    @property
    def backend(self) -> Backend:
        """The backend (``Backend.DEFAULT`` is reported as ``Backend.CPU``)."""
        return self._backend

    @property
    def device(self) -> int:
        """The device ordinal."""
        return self._device

    def __repr__(self) -> str:
        state = "closed" if not self._h else f"{self._h:#x}"
        return f"<qd.Context {self._backend.label}:{self._device} {state}>"

    def _check_open(self) -> None:
        if not self._h:
            raise ObjectClosedError("this qd.Context was closed")

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy the context (``qd_context_destroy``): drain all queued work, destroy every
        child object and free every allocation. Idempotent.

        Raises:
            InvalidOperationError: called from a host callback or host kernel of this context
                (the context stays open).
        """
        if not self._h:
            return
        status = _f_ctx_destroy(self._c)
        if status and status != Status.ERROR_INVALID_HANDLE:
            raise _err(status)
        self._h = 0
        for pool in self._record_events:  # with _h, before any code can let another thread in:
            pool.clear()  # a record pool that is not empty is an open context's (qd._speedups)
        self._c = _C_ZERO
        self._tls.rec.stream = None  # this thread's active stream died with the context
        self._finalizer.detach()
        self._held.clear()
        _drop_unrun(self._cb_errors)
        _warn_unreported(self._cb_errors)
        self._keep.clear()
        self._foreign.clear()
        self._wait_events.clear()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def synchronize(self) -> None:
        """Block until all work queued on every stream of the context has completed."""
        retired = self._held.retired
        done = len(retired)  # graphs closed before this call: their replays have run after it
        status = _f_ctx_sync(self._c)
        if status:
            self._check_open()
            raise _err(status, self)
        if done:
            del retired[:done]
        if self._cb_errors:
            _check_callback_errors(self)

    def stats(self) -> ContextStatistics:
        """Statistics of the context (``qd_context_get_stats``)."""
        self._check_open()
        raw = _lib.ContextStats()
        status = _C.qd_context_get_stats(self._h, _ref(raw))
        if status:
            raise _err(status, self)
        return ContextStatistics(*(getattr(raw, name) for name, _ in raw._fields_[2:]))

    def priority_range(self) -> Tuple[int, int]:
        """(least, greatest) stream priority: the default and the most urgent (smallest)."""
        self._check_open()
        least, greatest = c_int32(), c_int32()
        status = _C.qd_stream_priority_range(self._h, _ref(least), _ref(greatest))
        if status:
            raise _err(status, self)
        return least.value, greatest.value

    # -- timeline trace ---------------------------------------------------------------------

    def start_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Start tracing this context into ``path`` (``qd_trace_start``): every operation of
        its streams from now on is recorded, with the time it ran, for a Chrome trace JSON file
        that Perfetto opens (``qd trace view`` draws it). ``stop_trace()`` writes the file; so
        does closing the context while traced. :func:`qd.trace` wraps this in a ``with``.

        Raises:
            InvalidArgumentError: path cannot be written (its directory is missing or read-only,
                or it is a directory), or ``QD_TRACE_CAPACITY`` is malformed.
            InvalidOperationError: the context is already traced (a second start, or
                ``QD_TRACE`` is set).
        """
        raw = os.fsencode(path)
        self._check_open()
        status = _C.qd_trace_start(self._h, raw)
        if status:
            raise _err(status, self)

    def stop_trace(self) -> None:
        """Stop tracing and write the file (``qd_trace_stop``): waits for the traced work still
        running (only it), then writes every operation of the window.

        Raises:
            InvalidOperationError: the context is not being traced.
            InvalidArgumentError: the file cannot be written any more (tracing is off all the
                same; ``flush_trace()`` writes it again).
        """
        self._check_open()
        status = _C.qd_trace_stop(self._h)
        if status:
            raise _err(status, self)

    def flush_trace(self) -> None:
        """Write the trace so far without stopping it (``qd_trace_flush``); after
        ``stop_trace()``, write the stopped trace again.

        Raises:
            InvalidOperationError: the context was never traced.
            InvalidArgumentError: the file cannot be written.
        """
        self._check_open()
        status = _C.qd_trace_flush(self._h)
        if status:
            raise _err(status, self)

    # -- several devices (since 0.2) ---------------------------------------------------------

    def can_access_peer(self, peer: "Context") -> bool:
        """Whether work of this context can be given access to ``peer``'s memory
        (``qd_context_can_access_peer``): always for two contexts on one device and for CPU
        contexts; between two GPUs when the driver reports peer access.

        Raises:
            InvalidArgumentError: ``peer`` is this context.
            WrongContextError: ``peer`` is a context of another backend.
        """
        self._check_open()
        peer = _peer(peer)
        can = c_uint32()
        status = _C.qd_context_can_access_peer(self._h, peer._h, _ref(can))
        if status:
            raise _err(status, self)
        return bool(can.value)

    def enable_peer_access(self, peer: "Context") -> None:
        """Let work of this context access ``peer``'s memory, device memory from
        ``qd.alloc`` included (``qd_context_enable_peer_access``; CUDA: peer access and the
        peer pool's access). One direction; again is a no-op.

        Raises:
            NotSupportedError: the devices cannot access each other (the message says why).
            WrongContextError: ``peer`` is a context of another backend.
        """
        self._check_open()
        peer = _peer(peer)
        status = _C.qd_context_enable_peer_access(self._h, peer._h)
        if status:
            raise _err(status, self)

    # -- SM partitions (since 0.3) -----------------------------------------------------------

    def split(self, counts: Sequence[int]) -> List["Context"]:
        """Contexts over disjoint sets of this context's execution units, ``counts[i]`` units
        for part ``i`` (``qd_context_split``, qd.h "SM partitions"): CUDA SMs (green contexts;
        each count at least ``device_properties().split_minimum`` and a multiple of
        ``split_granularity``), CPU worker threads (this context's worker count plays the SM
        count). All or none. Each part is a full ``Context`` with this one's backend, device
        and validation mode, closed on its own; this context may be closed first.

        ``ctx.split([16, 112])`` on a 132-SM H100 gives a 16-SM and a 112-SM part.

        Raises:
            InvalidArgumentError: no counts, a count of 0, more units than the context has, or
                a count the device's split rule refuses (the message names the rule).
            InvalidOperationError: this context is itself a part.
            NotSupportedError: the backend (HIP) or the CUDA driver (before 12.4) has no
                partitions.
        """
        self._check_open()
        values = [_u32(c, "counts") for c in counts]
        n = len(values)
        arr = (c_uint32 * max(n, 1))(*values)
        out = (c_uint64 * max(n, 1))()
        status = _C.qd_context_split(self._h, _ref(arr), n, _ref(out))
        if status:
            raise _err(status, self)
        handles = list(out[:n])
        parts: List[Context] = []
        try:
            for i, handle in enumerate(handles):
                part = Context.__new__(Context)
                part._h = 0
                part._adopt(handle, self._backend, self._device, self._validate)
                handles[i] = 0
                parts.append(part)
        except BaseException:
            for handle in handles:
                if handle:
                    _f_ctx_destroy(_H(handle))
            for part in parts:
                part.close()
            raise
        return parts

    # -- streams ----------------------------------------------------------------------------

    @property
    def default_stream(self) -> "Stream":
        """The context's default stream: an ordinary stream that lives as long as the
        context. Closing its wrapper does nothing."""
        self._check_open()
        return _new_stream(self, self._default_h, StreamKind.DEFAULT)

    def create_stream(self, *, non_blocking: bool = False, priority: int = 0) -> "Stream":
        """Create a stream owned by the caller (``qd_stream_create``). ``with`` on it
        synchronizes, then destroys it.

        Args:
            non_blocking: QD_STREAM_NON_BLOCKING (GPU: do not sync with the legacy stream).
            priority: lower is more urgent; clamped to ``priority_range()``.
        """
        self._check_open()
        desc = _lib.StreamDesc()
        desc.flags = 1 if non_blocking else 0
        desc.priority = _int(priority, _I32_MIN, _I32_MAX, "int32_t", "priority")
        out = c_uint64()
        status = _C.qd_stream_create(self._h, _ref(desc), _ref(out))
        if status:
            raise _err(status, self)
        return _new_stream(self, out.value, StreamKind.OWNED)

    def acquire_stream(self) -> "Stream":
        """Lease a stream from the context's pool (``qd_stream_acquire``).

        The lease is exclusive. ``close()`` or the end of a ``with`` block gives it back
        (``qd_stream_release``, which does not wait: queued work still completes).

        Raises:
            PoolExhaustedError: every stream of the pool is leased (never blocks).
        """
        out = c_uint64()
        status = _f_acquire(self._c, byref(out))  # a closed context's _c is 0: C refuses it
        if status:
            self._check_open()
            raise _err(status, self)
        s = _STREAM_NEW(Stream)
        s._h = s._key = out.value
        s._c = out
        s._ctx = self
        s._kind = _LEASED  # (_owner stays unset: a lease has none)
        return s

    if _lib.CFFI:  # the same, through cffi: handles are ints, the out cell a cffi uint64_t[1]
        _doc = acquire_stream.__doc__

        def acquire_stream(self) -> "Stream":  # noqa: F811
            out = _new_u64()
            status = _f_acquire(self._c, out)
            if status:
                self._check_open()
                raise _err(status, self)
            s = _STREAM_NEW(Stream)
            s._h = s._key = s._c = out[0]
            s._ctx = self
            s._kind = _LEASED
            return s

        acquire_stream.__doc__ = _doc
        del _doc

    if _SP is not None:  # the same, through qd._speedups: ints in, the handle (or the status) out
        _doc = acquire_stream.__doc__

        def acquire_stream(self) -> "Stream":  # noqa: F811
            h = _sp_acquire(self._h)  # a closed context's _h is 0: C refuses it
            if h <= 0:
                self._check_open()
                raise _err(h, self)
            s = _STREAM_NEW(Stream)
            s._h = s._key = h
            s._c = _H(h)
            s._ctx = self
            s._kind = _LEASED
            return s

        acquire_stream.__doc__ = _doc
        del _doc

    def create_event(self, *, timing: bool = False) -> "Event":
        """Create an event (``qd_event_create``); ``timing=True`` records timestamps so that
        ``Event.elapsed_ms`` works."""
        self._check_open()
        out = c_uint64()
        status = _C.qd_event_create(self._h, 1 if timing else 0, _ref(out))
        if status:
            raise _err(status, self)
        ev = _EVENT_NEW(Event)
        ev._h = ev._key = h = out.value
        ev._c = _H(h)
        ev._ctx = self
        ev._timing = bool(timing)
        ev._pooled = None
        return ev

    def create_timeline(self, initial: int = 0) -> "Timeline":
        """Create a timeline (``qd_timeline_create``): a 64-bit counter starting at
        ``initial`` that streams (``Stream.signal``, ``Stream.wait``) and the host
        (``Timeline.signal``, ``Timeline.wait``) signal and wait on."""
        from ._timeline import _new_timeline, _value

        self._check_open()
        out = c_uint64()
        status = _C.qd_timeline_create(self._h, _value(initial), _ref(out))
        if status:
            raise _err(status, self)
        return _new_timeline(self, out.value)

    # -- active stream ----------------------------------------------------------------------

    def set_active_stream(self, stream: "Stream") -> "Stream":
        """Make ``stream`` this thread's active stream for the context
        (``qd_stream_set_active``) and return the one it replaces.

        Prefer ``with ctx.active_stream(s):``, which restores the previous one.

        While a stream the caller owns (created, leased or imported) is active on this thread,
        the context keeps a reference to it, so ``ctx.set_active_stream(ctx.create_stream())``
        works as ``torch.cuda.set_stream(torch.cuda.Stream())`` does: the stream lives until
        another stream is made active on this thread, the thread ends, or the context closes.
        (It also keeps the context alive meanwhile, as the stream does.)
        """
        # The fast path checks no handle before the C call: a closed stream or context has _c
        # 0, which C refuses (QD_ERROR_INVALID_HANDLE); the error is then named below. A stream
        # of another context is refused here when that context was closed (its _c is not 0).
        if type(stream) is not Stream and not isinstance(stream, Stream):
            raise _stream_type_error(stream)
        if stream._ctx is not self and not stream._ctx._h:
            raise stream._closed_error()
        rec = self._tls.rec
        if _SP is not None:
            prev = _sp_set_active(self._h, stream._h)
            if prev <= 0:
                if not stream._h or not stream._ctx._h:
                    raise stream._closed_error()
                self._check_open()
                raise _err(prev, self)
        else:
            status = _f_set_active(self._c, stream._c, rec.prev_ref)
            if status:
                if not stream._h or not stream._ctx._h:
                    raise stream._closed_error()
                self._check_open()
                raise _err(status, self)
            prev = rec.prev[0]
        old = rec.stream  # the Stream set before, held strongly or (default, view) weakly
        if old is None:
            ref = rec.ref
            if ref is not None:
                old = ref()
        kind = stream._kind
        if kind is _OWNED or kind is _LEASED or kind is _BORROWED:
            rec.stream = stream  # held while active (see the docstring)
            rec.ref = None
        else:
            rec.stream = None  # owns nothing: not kept alive (nor its context, by a cycle)
            rec.ref = _weakref(stream)
        if old is not None and old._key == prev:
            return old
        return self._wrap(prev)

    def get_active_stream(self, *, refresh: bool = False) -> "Stream":
        """This thread's active stream for the context: the last one set on this thread, or
        the default stream if none was set.

        The binding remembers the stream it set on this thread (the ``Stream`` object itself),
        so while one is in effect this is a Python attribute read, not a C call. C code that
        changes the active stream of this context on this thread behind Python's back (without
        restoring it) is seen with ``refresh=True``, which always asks the library
        (``qd_stream_get_active``).
        """
        rec = self._tls.rec
        stream = rec.stream
        if stream is not None and stream._h and not refresh:
            return stream
        ref = rec.ref
        if ref is not None and not refresh:
            stream = ref()
            if stream is not None and stream._h:
                return stream
        if not self._h:
            raise ObjectClosedError("this qd.Context was closed")
        if _SP is not None:
            h = _sp_get_active(self._h)
            if h <= 0:
                raise _err(h, self)
        else:
            out = c_uint64()
            status = _f_get_active(self._c, _ref(out))
            if status:
                raise _err(status, self)
            h = out.value
        stream = rec.stream
        if stream is None and ref is not None:
            stream = ref()
        if stream is not None and stream._key == h:
            return stream
        stream = self._wrap(h)
        if refresh:
            rec.ref = _weakref(stream)
            rec.stream = None  # C's active stream is another one now
        return stream

    def active_stream(self, stream: "Stream") -> "_ActiveStreamScope":
        """A ``with`` scope in which ``stream`` is this thread's active stream; the previous
        one is restored on exit, also when the block raises."""
        if not isinstance(stream, Stream):
            raise _stream_type_error(stream)
        return _ActiveStreamScope(self, stream)

    def _wrap(self, handle: int) -> "Stream":
        kind = StreamKind.DEFAULT if handle == self._default_h else StreamKind.VIEW
        return _new_stream(self, handle, kind)

    # -- modules, kernels, host memory --------------------------------------------------------

    def load_module(self, image: Union[str, "os.PathLike[str]", bytes, bytearray,
                                       memoryview]) -> "Module":
        """Load a module (``qd_module_load``).

        Args:
            image: a path (str or PathLike) or the image bytes.

                - CPU: the path of a shared library whose exported ``qd_host_kernel_fn``
                  functions are kernels. It must contain a ``/`` (``"./k.so"``, not
                  ``"k.so"``): the system library search path is never consulted.
                - CUDA / HIP: PTX, cubin or fatbin (a code object on HIP), as bytes, or a path
                  to a file holding one (the binding reads it). A NUL is appended to bytes
                  that do not end with one, as PTX needs.

        Raises:
            NotFoundError: (CPU) no file at that path; (GPU) the file cannot be read.
            InvalidImageError: the loader or driver rejected the image.
        """
        self._check_open()
        gpu = self._backend in (Backend.CUDA, Backend.HIP)
        if isinstance(image, (str, os.PathLike)):
            path = os.fsencode(image)
            if gpu:
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError as exc:
                    raise NotFoundError(f"cannot read module image {os.fsdecode(path)!r}: "
                                        f"{exc.strerror or exc}") from None
            else:
                data = path
        elif isinstance(image, (bytes, bytearray, memoryview)):
            data = bytes(image)
        else:
            raise ArgumentTypeError(
                f"image must be a path or bytes, not {type(image).__name__}")
        if gpu and data and not data.endswith(b"\0"):
            data += b"\0"
        out = c_uint64()
        status = _C.qd_module_load(self._h, _lib.cbytes(data), len(data), _ref(out))
        if status:
            raise _err(status, self)
        m = object.__new__(Module)
        m._h = m._key = h = out.value
        m._c = _H(h)
        m._ctx = self
        m._kernels = weakref.WeakSet()
        return m

    def host_alloc(self, nbytes: int) -> "HostBuffer":
        """Allocate pinned host memory registered with the context (``qd_host_alloc``).

        Free it with ``close()`` (or a ``with`` block) once no queued work uses it; whatever is
        left is freed when the context closes. It is not freed by garbage collection, because
        queued work may still use it.
        """
        self._check_open()
        n = _u64(nbytes, "nbytes")
        out = c_void_p()
        status = _C.qd_host_alloc(self._h, n, _ref(out))
        if status:
            raise _err(status, self)
        hb = object.__new__(HostBuffer)
        hb._ctx = self
        hb._address = out.value or 0
        hb._size = n
        return hb


class _Record:
    """One thread's record for one context: a weak reference to the Stream this binding last
    made active; the same Stream held strongly when it owns something (created, leased or
    imported), so that a temporary stays alive while it is active (set_active_stream); and the
    buffer qd_stream_set_active writes the previous stream into."""

    __slots__ = ("ref", "stream", "prev", "prev_ref")

    def __init__(self) -> None:
        self.ref: Optional["weakref.ReferenceType[Stream]"] = None
        self.stream: Optional[Stream] = None
        self.prev = (c_uint64 * 1)()  # what qd_stream_set_active writes; read as prev[0]
        self.prev_ref = _ref(self.prev)


class _ActiveRecord(threading.local):
    """Per thread: ``rec``, this thread's _Record (one thread-local lookup per call)."""

    def __init__(self) -> None:  # runs once in each thread that uses the record
        self.rec = _Record()


_weakref = weakref.ref
if _lib.CFFI:
    import functools

    _new_u64 = functools.partial(_lib.ffi.new, _lib.ffi.typeof("uint64_t[1]"))


class _ActiveStreamScope:
    """``with ctx.active_stream(s) as s:`` (see Context.active_stream)."""

    __slots__ = ("_ctx", "_stream", "_prev")

    def __init__(self, ctx: Context, stream: "Stream") -> None:
        self._ctx = ctx
        self._stream = stream
        self._prev: Optional[Stream] = None

    def __enter__(self) -> "Stream":
        self._prev = self._ctx.set_active_stream(self._stream)
        return self._stream

    def __exit__(self, *exc_info: Any) -> None:
        prev, self._prev = self._prev, None
        if prev is None:
            return
        ctx = self._ctx
        if not ctx._h:
            return  # the context was closed inside the scope: nothing left to restore
        if not prev._h:
            raise ObjectClosedError(
                "cannot restore the previous active stream: it was closed inside the scope "
                f"(the active stream stays {self._stream!r})")
        ctx.set_active_stream(prev)
