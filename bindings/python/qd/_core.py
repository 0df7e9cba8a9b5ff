"""Context, Stream, Event, Module, Kernel, Launcher, memory and host callbacks.

One binding call is one C call, plus error translation, plus ownership (DESIGN.md principle 8).
The few exceptions are written next to the code: ``Context.get_active_stream`` answers from a
per-thread record of what this binding set (see its docstring), and copies that involve a Python
buffer queue a second, internal host callback that keeps the buffer alive until the copy ran.
"""

from __future__ import annotations

import atexit
import ctypes
import enum
import itertools
import operator
import os
import threading
import weakref
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_ssize_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
    sizeof,
)
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _lib
from ._errors import (
    ArgumentRangeError,
    ArgumentTypeError,
    CallbackError,
    HandleTypeError,
    InvalidAddressError,
    InvalidArgumentError,
    InvalidHandleError,
    NotFoundError,
    NotReadyError,
    NotSupportedError,
    ObjectClosedError,
    PoolExhaustedError,
    QdError,
    Status,
    error_for_status,
)

__all__ = [
    "Backend",
    "Context",
    "ContextStatistics",
    "DeviceBuffer",
    "DeviceProperties",
    "Event",
    "HostBuffer",
    "Kernel",
    "Launcher",
    "Module",
    "Stream",
    "StreamKind",
    "Task",
    "alloc",
    "device_count",
    "device_properties",
    "free",
    "kernel_arg",
    "launch_host_fn",
    "launch_parallel",
    "memcpy",
    "memset",
    "version",
]

_U8_MAX = 0xFF
_U32_MAX = 0xFFFF_FFFF
_U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
#: QD_MAX_ARGS; more arguments are passed on to C, which rejects them.
MAX_ARGS = 64
#: The largest stream pool qd_context_desc allows ("at most 4096").
_MAX_POOL = 4096

# Hot-path copies of the C functions, without argtypes (see _lib.raw).
_f_ctx_destroy = _lib.raw("qd_context_destroy")
_f_ctx_sync = _lib.raw("qd_context_synchronize")
_f_stream_destroy = _lib.raw("qd_stream_destroy")
_f_stream_sync = _lib.raw("qd_stream_synchronize")
_f_stream_query = _lib.raw("qd_stream_query")
_f_stream_wait = _lib.raw("qd_stream_wait_event")
_f_acquire = _lib.raw("qd_stream_acquire")
_f_release = _lib.raw("qd_stream_release")
_f_set_active = _lib.raw("qd_stream_set_active")
_f_get_active = _lib.raw("qd_stream_get_active")
_f_event_destroy = _lib.raw("qd_event_destroy")
_f_event_record = _lib.raw("qd_event_record")
_f_event_query = _lib.raw("qd_event_query")
_f_event_sync = _lib.raw("qd_event_synchronize")
_f_module_unload = _lib.raw("qd_module_unload")
_f_kernel_destroy = _lib.raw("qd_kernel_destroy")
_f_launch = _lib.raw("qd_launch")
_f_launch_parallel = _lib.raw("qd_launch_parallel")
_f_launch_host_fn = _lib.raw("qd_launch_host_fn")
_f_alloc = _lib.raw("qd_mem_alloc_async")
_f_free = _lib.raw("qd_mem_free_async")
_f_memcpy = _lib.raw("qd_memcpy_async")
_f_memset = _lib.raw("qd_memset_async")

_C_U32 = [c_uint32(i) for i in range(MAX_ARGS + 1)]  # shared, never mutated


# ----------------------------------------------------------------------------------------------
# Argument conversion. The rule (README, "Argument validation"): an int is passed to C only if
# it fits the C type of its parameter; otherwise ArgumentRangeError (QD_ERROR_INVALID_ARGUMENT,
# also an OverflowError) is raised before any C call. Nothing ever wraps. A value that fits is
# passed unchanged and the C library decides (2**64-1 bytes -> QD_ERROR_OVERFLOW, ...).
# ----------------------------------------------------------------------------------------------


def _int(value: Any, lo: int, hi: int, ctype: str, what: str) -> int:
    if type(value) is not int:
        if value is None or isinstance(value, (float, complex, str, bytes, bytearray)):
            raise ArgumentTypeError(f"{what} must be an int, not {type(value).__name__}")
        try:
            value = operator.index(value)
        except TypeError:
            raise ArgumentTypeError(
                f"{what} must be an int, not {type(value).__name__}") from None
    if value < lo or value > hi:
        raise ArgumentRangeError(
            f"{what} = {value} does not fit the C type {ctype} (range {lo}..{hi}); "
            "qd never wraps out-of-range values")
    return value


def _u64(value: Any, what: str) -> int:
    if type(value) is int and 0 <= value <= _U64_MAX:
        return value
    return _int(value, 0, _U64_MAX, "uint64_t", what)


def _u32(value: Any, what: str) -> int:
    if type(value) is int and 0 <= value <= _U32_MAX:
        return value
    return _int(value, 0, _U32_MAX, "uint32_t", what)


def _err(status: int, ctx: Optional["Context"] = None) -> QdError:
    """The exception for a failed C call (read the message before anything else runs)."""
    exc = error_for_status(status)
    if ctx is not None:
        try:
            if status == Status.ERROR_INVALID_HANDLE and not ctx._h:
                exc = type(exc)(exc.message + " (its qd.Context was closed)", status)
            elif status == Status.ERROR_DEVICE_LOST and ctx._cb_errors:
                exc.__cause__ = ctx._cb_errors[0]
        except Exception:
            pass
    return exc


def _stream_type_error(stream: Any) -> QdError:
    if stream is None:
        return HandleTypeError(
            "stream is required: pass stream=<qd.Stream> (e.g. ctx.default_stream); qd never "
            "falls back to a default stream")
    return HandleTypeError(f"stream= must be a qd.Stream, not {type(stream).__name__} "
                           "(import foreign streams with qd.Stream.from_external)")


def _stream_c(stream: Any) -> c_uint64:
    """The c_uint64 of an open stream, or the error (``stream=`` of every scheduling call)."""
    if isinstance(stream, Stream):
        if stream._h:
            return stream._c
        raise stream._closed_error()
    raise _stream_type_error(stream)


def _check_callback_errors(ctx: "Context") -> None:
    errors = ctx._cb_errors
    if errors:
        first = errors.pop(0)
        more = len(errors)
        errors.clear()
        raise CallbackError(
            f"a Python host callback or host kernel on this context raised "
            f"{type(first).__name__}: {first}" + (f" (and {more} more)" if more else "")
        ) from first


# ----------------------------------------------------------------------------------------------
# Host callbacks: one C trampoline for the whole process. Each queued callable waits in
# _pending under an integer key (the user_data) until the trampoline pops and runs it, so it
# stays alive exactly as long as needed. A failed qd_launch_host_fn never calls it (qd.h), so
# the entry is dropped at once.
# ----------------------------------------------------------------------------------------------

_pending: dict = {}
_keys = itertools.count(1)


def _trampoline(key: Optional[int]) -> None:
    try:
        fn, errors = _pending.pop(key)
    except BaseException:  # interpreter shutdown, or an unknown key: nothing to run
        return
    try:
        fn()
    except BaseException as exc:  # reported by the next synchronize(); never printed here
        try:
            errors.append(exc)
        except BaseException:
            pass


_TRAMPOLINE = _lib.HostFn(_trampoline)
# Never freed, not even by module teardown: C may hold this pointer until every context is gone.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_TRAMPOLINE))


def _enqueue(stream_c: c_uint64, fn: Callable[[], Any], errors: list) -> int:
    key = next(_keys)
    _pending[key] = (fn, errors)
    status = _f_launch_host_fn(stream_c, _TRAMPOLINE, c_void_p(key))
    if status:
        _pending.pop(key, None)
    return status


# ----------------------------------------------------------------------------------------------
# Context destruction: explicit (close), by garbage collection, or at interpreter exit.
# weakref.finalize runs at exit (atexit) for every context still alive, while other threads can
# still take the GIL, so host callbacks still queued run to completion before the interpreter
# goes away and no qd thread ever calls into a finalizing interpreter.
# ----------------------------------------------------------------------------------------------

_deferred_lock = threading.Lock()
_deferred_threads: List[threading.Thread] = []


def _destroy_context(handle: int, keepalive: list) -> None:
    try:
        status = _f_ctx_destroy(c_uint64(handle))
        if status == Status.ERROR_INVALID_OPERATION:
            # The last reference died inside a host callback or host kernel of this very
            # context (qd refuses to drain from its own worker): destroy it from a helper thread.
            thread = threading.Thread(target=_destroy_context, args=(handle, keepalive),
                                      name=f"qd-destroy-{handle:#x}", daemon=True)
            with _deferred_lock:
                _deferred_threads.append(thread)
            thread.start()
    except BaseException:
        pass


def _join_deferred() -> None:
    try:
        while True:
            with _deferred_lock:
                if not _deferred_threads:
                    return
                thread = _deferred_threads.pop()
            thread.join()
    except BaseException:
        pass


atexit.register(_join_deferred)  # runs after weakref.finalize's exit hook (LIFO)


# ----------------------------------------------------------------------------------------------
# Devices, version
# ----------------------------------------------------------------------------------------------


class Backend(enum.IntEnum):
    """``qd_backend``. ``Context(backend=...)`` also accepts the lower-case names."""

    DEFAULT = 0  #: the embedded default: the CPU backend
    CPU = 1
    CUDA = 2
    HIP = 3


def _backend(value: Union[Backend, str, int]) -> int:
    if isinstance(value, str):
        try:
            return Backend[value.upper()].value
        except KeyError:
            raise InvalidArgumentError(
                f"unknown backend {value!r}: use 'cpu', 'cuda', 'hip' or 'default'") from None
    return _int(value, _I32_MIN, _I32_MAX, "qd_backend", "backend")


def version() -> Tuple[int, int, int]:
    """The loaded libqd's version as (major, minor, patch) (``qd_version``)."""
    v = _lib.lib.qd_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def device_count(backend: Union[Backend, str, int]) -> int:
    """Number of devices of a backend (``qd_device_count``; the CPU backend has 1).

    Raises:
        BackendUnavailableError: the backend is not built in, or its driver cannot be loaded.
    """
    count = c_uint32()
    status = _lib.lib.qd_device_count(_backend(backend), byref(count))
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


def device_properties(backend: Union[Backend, str, int], device: int = 0) -> DeviceProperties:
    """Describe one device (``qd_device_get_info``)."""
    info = _lib.DeviceInfo()
    status = _lib.lib.qd_device_get_info(_backend(backend), _u32(device, "device"), byref(info))
    if status:
        raise _err(status)
    return DeviceProperties(Backend(info.backend), info.device,
                            info.name.decode("utf-8", "replace"), info.driver_version,
                            (info.compute_major, info.compute_minor), info.multiprocessors,
                            info.total_memory)


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


class Context:
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

    Raises:
        InvalidArgumentError, BackendUnavailableError, OutOfMemoryError: see qd_context_create.
    """

    __slots__ = ("_h", "_c", "_backend", "_device", "_default_h", "_tls", "_cb_errors",
                 "_keep", "_finalizer", "__weakref__")

    def __init__(self, backend: Union[Backend, str, int] = Backend.DEFAULT, device: int = 0, *,
                 stream_pool_size: int = 0, event_pool_size: int = 0,
                 cpu_worker_threads: int = 0) -> None:
        self._h = 0
        desc = _lib.ContextDesc()
        desc.backend = _u32(_backend(backend), "backend")
        desc.device = _u32(device, "device")
        desc.stream_pool_size = _u32(stream_pool_size, "stream_pool_size")
        desc.event_pool_size = _u32(event_pool_size, "event_pool_size")
        desc.cpu_worker_threads = _u32(cpu_worker_threads, "cpu_worker_threads")
        out = c_uint64()
        status = _lib.lib.qd_context_create(byref(desc), byref(out))
        if status:
            raise _err(status)
        handle = out.value
        default = c_uint64()
        status = _lib.lib.qd_context_default_stream(handle, byref(default))
        if status:
            exc = _err(status)
            _f_ctx_destroy(c_uint64(handle))
            raise exc
        self._h = handle
        self._c = c_uint64(handle)
        b = desc.backend
        self._backend = Backend.CPU if b == Backend.DEFAULT else Backend(b)
        self._device = desc.device
        self._default_h = default.value
        self._tls = _ActiveRecord()
        #: Exceptions raised by Python host callbacks / host kernels, not reported yet.
        self._cb_errors: List[BaseException] = []
        #: ctypes callbacks (Python host kernels) C may call until the context is destroyed.
        self._keep: List[Any] = []
        self._finalizer = weakref.finalize(self, _destroy_context, handle, self._keep)

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
        return f"<qd.Context {self._backend.name.lower()}:{self._device} {state}>"

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
        self._c.value = 0
        self._finalizer.detach()
        self._keep.clear()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def synchronize(self) -> None:
        """Block until all work queued on every stream of the context has completed."""
        status = _f_ctx_sync(self._c)
        if status:
            self._check_open()
            raise _err(status, self)
        if self._cb_errors:
            _check_callback_errors(self)

    def stats(self) -> ContextStatistics:
        """Statistics of the context (``qd_context_get_stats``)."""
        self._check_open()
        raw = _lib.ContextStats()
        status = _lib.lib.qd_context_get_stats(self._h, byref(raw))
        if status:
            raise _err(status, self)
        return ContextStatistics(*(getattr(raw, name) for name, _ in raw._fields_[2:]))

    def priority_range(self) -> Tuple[int, int]:
        """(least, greatest) stream priority: the default and the most urgent (smallest)."""
        self._check_open()
        least, greatest = c_int32(), c_int32()
        status = _lib.lib.qd_stream_priority_range(self._h, byref(least), byref(greatest))
        if status:
            raise _err(status, self)
        return least.value, greatest.value

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
        status = _lib.lib.qd_stream_create(self._h, byref(desc), byref(out))
        if status:
            raise _err(status, self)
        return _new_stream(self, out.value, StreamKind.OWNED, c=out)

    def acquire_stream(self) -> "Stream":
        """Lease a stream from the context's pool (``qd_stream_acquire``).

        The lease is exclusive. ``close()`` or the end of a ``with`` block gives it back
        (``qd_stream_release``, which does not wait: queued work still completes).

        Raises:
            PoolExhaustedError: every stream of the pool is leased (never blocks).
        """
        if not self._h:
            raise ObjectClosedError("this qd.Context was closed")
        out = c_uint64()
        status = _f_acquire(self._c, byref(out))
        if status:
            raise _err(status, self)
        s = _STREAM_NEW(Stream)
        s._h = s._key = out.value
        s._c = out
        s._ctx = self
        s._kind = _LEASED  # (_owner stays unset: a lease has none)
        return s

    def create_event(self, *, timing: bool = False) -> "Event":
        """Create an event (``qd_event_create``); ``timing=True`` records timestamps so that
        ``Event.elapsed_ms`` works."""
        self._check_open()
        out = c_uint64()
        status = _lib.lib.qd_event_create(self._h, 1 if timing else 0, byref(out))
        if status:
            raise _err(status, self)
        ev = _EVENT_NEW(Event)
        ev._h = ev._key = out.value
        ev._c = out
        ev._ctx = self
        ev._timing = bool(timing)
        return ev

    # -- active stream ----------------------------------------------------------------------

    def set_active_stream(self, stream: "Stream") -> "Stream":
        """Make ``stream`` this thread's active stream for the context
        (``qd_stream_set_active``) and return the one it replaces.

        Prefer ``with ctx.active_stream(s):``, which restores the previous one.
        """
        if not isinstance(stream, Stream):
            raise _stream_type_error(stream)
        if not stream._h:
            raise stream._closed_error()
        if not self._h:
            raise ObjectClosedError("this qd.Context was closed")
        rec = self._tls.rec
        status = _f_set_active(self._c, stream._c, rec.prev_ref)
        if status:
            raise _err(status, self)
        old = rec.ref
        rec.ref = _weakref(stream)
        prev = rec.prev.value
        if old is not None:
            old = old()
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
        ref = rec.ref
        if ref is not None and not refresh:
            stream = ref()
            if stream is not None:
                return stream
        if not self._h:
            raise ObjectClosedError("this qd.Context was closed")
        out = c_uint64()
        status = _f_get_active(self._c, byref(out))
        if status:
            raise _err(status, self)
        if ref is not None:
            stream = ref()
            if stream is not None and stream._key == out.value:
                return stream
        stream = self._wrap(out.value)
        if refresh:
            rec.ref = _weakref(stream)
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
        status = _lib.lib.qd_module_load(self._h, c_char_p(data), len(data), byref(out))
        if status:
            raise _err(status, self)
        m = object.__new__(Module)
        m._h = m._key = out.value
        m._c = out
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
        status = _lib.lib.qd_host_alloc(self._h, n, byref(out))
        if status:
            raise _err(status, self)
        hb = object.__new__(HostBuffer)
        hb._ctx = self
        hb._address = out.value or 0
        hb._size = n
        return hb


class _Record:
    """One thread's record for one context: a weak reference to the Stream this binding last
    made active (weak, so it never keeps a stream, and through it the context, alive), and the
    buffer qd_stream_set_active writes the previous stream into."""

    __slots__ = ("ref", "prev", "prev_ref")

    def __init__(self) -> None:
        self.ref: Optional["weakref.ReferenceType[Stream]"] = None
        self.prev = c_uint64()
        self.prev_ref = byref(self.prev)


class _ActiveRecord(threading.local):
    """Per thread: ``rec``, this thread's _Record (one thread-local lookup per call)."""

    def __init__(self) -> None:  # runs once in each thread that uses the record
        self.rec = _Record()


_weakref = weakref.ref


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


# ----------------------------------------------------------------------------------------------
# Streams
# ----------------------------------------------------------------------------------------------


class _ContextChild:
    """What every object a context owns (Stream, Event, Module, Kernel) answers alike."""

    __slots__ = ()

    @property
    def handle(self) -> int:
        """The qd handle (0 once closed)."""
        return self._h  # type: ignore[attr-defined]

    @property
    def context(self) -> "Context":
        """The context the object belongs to."""
        return self._ctx  # type: ignore[attr-defined]

    @property
    def closed(self) -> bool:
        """Whether the object was closed (destroyed, released, unloaded, or its context closed)."""
        return not self._h  # type: ignore[attr-defined]

    # Lifetime shared by Event, Module and Kernel (Stream has its own: what close() does depends
    # on its kind). A subclass names its destroy call in _destroy and says what close() means in
    # its own close() docstring.
    _destroy: Any = None

    def _after_close(self) -> None:
        """Invalidate what dies with this object (a module's kernels)."""

    def _close(self) -> None:
        if not self._h:  # type: ignore[attr-defined]
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
                type(self)._destroy(self._c)  # type: ignore[attr-defined]
        except BaseException:
            pass


class StreamKind(enum.Enum):
    """What a Stream wrapper owns, which decides what ``close()`` does."""

    OWNED = "owned"  #: qd_stream_create; close() destroys it
    LEASED = "leased"  #: from the pool; close() releases it
    BORROWED = "borrowed"  #: qd_stream_import; close() forgets it, the native stream lives on
    DEFAULT = "default"  #: the context's default stream; close() does nothing
    VIEW = "view"  #: a handle set active by other code; close() does nothing


_OWNED, _LEASED, _BORROWED = StreamKind.OWNED, StreamKind.LEASED, StreamKind.BORROWED


class Stream(_ContextChild):
    """A qd stream: an in-order queue of work; different streams run concurrently.

    Make one with ``Context.create_stream`` (owned), ``Context.acquire_stream`` (a pool lease),
    ``Stream.fork`` (leases), ``Stream.from_external`` (borrowed), or get the context's
    ``default_stream``. Pass it as ``stream=`` to every call that schedules work.

    ``with`` on an owned, borrowed or default stream synchronizes it at the end of the block,
    then closes it; on a lease it only releases it (work already queued still completes).
    When the block raises, nothing is synchronized: the stream is closed at once (its work
    still completes).
    """

    __slots__ = ("_h", "_c", "_key", "_ctx", "_kind", "_owner", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make streams with Context.create_stream(), Context.acquire_stream(), "
                        "Stream.fork() or Stream.from_external()")

    # -- identity ---------------------------------------------------------------------------

    @property
    def kind(self) -> StreamKind:
        """What this wrapper owns (StreamKind), which decides what ``close()`` does."""
        return self._kind

    def __repr__(self) -> str:
        state = "closed" if not self._h else f"{self._h:#x}"
        return f"<qd.Stream {self._kind.value} {state}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def _closed_error(self) -> ObjectClosedError:
        what = {_LEASED: "released"}.get(self._kind, "closed")
        return ObjectClosedError(f"this qd.Stream (handle {self._key:#x}) was {what}")

    def _check(self) -> None:
        if not self._h:
            raise self._closed_error()

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy (owned), release (lease) or forget (borrowed) the stream. Returns at once;
        queued work still completes. Idempotent; does nothing on default-stream wrappers."""
        if not self._h:
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
            if self._h:
                self.synchronize()
        finally:
            self.close()

    def __del__(self) -> None:
        try:
            h = self._h
            if h:
                kind = self._kind
                if kind is _OWNED or kind is _BORROWED:
                    self._h = 0
                    _f_stream_destroy(self._c)
                elif kind is _LEASED:
                    self._h = 0
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
        if not self._h:
            raise self._closed_error()
        status = _f_stream_sync(self._c)
        if status:
            raise _err(status, self._ctx)
        if self._ctx._cb_errors:
            _check_callback_errors(self._ctx)

    sync = synchronize

    def query(self) -> bool:
        """True if all work queued on the stream has completed (never blocks)."""
        if not self._h:
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

    def wait(self, event: "Event") -> None:
        """Make later work on this stream wait for the event's most recent record
        (``qd_stream_wait_event``); the host does not block."""
        if not self._h:
            raise self._closed_error()
        if not isinstance(event, Event):
            raise HandleTypeError(f"event must be a qd.Event, not {type(event).__name__}")
        if not event._h:
            raise event._closed_error()
        status = _f_stream_wait(self._c, event._c)
        if status:
            raise _err(status, self._ctx)

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
        status = _lib.lib.qd_stream_fork(self._h, count, children)
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
        status = _lib.lib.qd_stream_join(self._h, arr, len(kids))
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
        status = _lib.lib.qd_stream_get_priority(self._h, byref(out))
        if status:
            raise _err(status, self._ctx)
        return out.value

    @property
    def native_handle(self) -> int:
        """The native stream (CUstream / hipStream_t) as an int (``qd_stream_native_handle``).

        Raises:
            NotSupportedError: the CPU backend has no native streams.
        """
        self._check()
        out = c_uint64()
        status = _lib.lib.qd_stream_native_handle(self._h, byref(out))
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
        """Import a foreign CUDA stream as a borrowed qd stream (``qd_stream_import``).

        ``obj`` is any object with ``__cuda_stream__`` (a torch / CuPy / cuda.core stream).
        The returned Stream keeps ``obj`` alive until it is closed, and qd never destroys the
        native stream.

        Raises:
            ArgumentTypeError: ``obj`` does not implement ``__cuda_stream__``.
            NotSupportedError: ``ctx`` is a CPU context.
        """
        if not isinstance(ctx, Context):
            raise HandleTypeError(f"ctx must be a qd.Context, not {type(ctx).__name__}")
        ctx._check_open()
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
        if ver != 0:
            raise InvalidArgumentError(f"unsupported __cuda_stream__ protocol version {ver}")
        out = c_uint64()
        status = _lib.lib.qd_stream_import(ctx._h, _u64(native, "native stream"), byref(out))
        if status:
            raise _err(status, ctx)
        return _new_stream(ctx, out.value, _BORROWED, owner=obj, c=out)


_STREAM_NEW = object.__new__
_EVENT_NEW = object.__new__
_C_ZERO = c_uint64(0)  # the c_uint64 of every closed object (C rejects handle 0)


def _new_stream(ctx: Context, handle: int, kind: StreamKind, owner: Any = None,
                c: Optional[c_uint64] = None) -> Stream:
    s = _STREAM_NEW(Stream)
    s._h = s._key = handle
    s._c = c if c is not None else c_uint64(handle)
    s._ctx = ctx
    s._kind = kind
    s._owner = owner
    return s


# ----------------------------------------------------------------------------------------------
# Events
# ----------------------------------------------------------------------------------------------


class Event(_ContextChild):
    """A qd event: a completion marker recorded on a stream (``Context.create_event``).

    ``end - start`` (two timing events) is ``start.elapsed_ms(end)``.
    """

    __slots__ = ("_h", "_c", "_key", "_ctx", "_timing", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make events with Context.create_event()")

    @property
    def timing(self) -> bool:
        """Whether the event records timestamps (created with ``timing=True``)."""
        return self._timing

    def __repr__(self) -> str:
        state = "closed" if not self._h else f"{self._h:#x}"
        return f"<qd.Event {'timing ' if self._timing else ''}{state}>"

    def _closed_error(self) -> ObjectClosedError:
        return ObjectClosedError(f"this qd.Event (handle {self._key:#x}) was closed")

    _destroy = staticmethod(_f_event_destroy)

    def close(self) -> None:
        """Destroy the event; returns at once, even if a record is pending. Idempotent."""
        self._close()

    def record(self, *, stream: Stream) -> "Event":
        """Record the event on ``stream`` (required): it completes when all work queued on
        the stream so far has completed. Returns the event."""
        sc = _stream_c(stream)
        if not self._h:
            raise self._closed_error()
        status = _f_event_record(sc, self._c)
        if status:
            raise _err(status, self._ctx)
        return self

    def query(self) -> bool:
        """True if the most recent record has completed (or it was never recorded)."""
        if not self._h:
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
        if not self._h:
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
        if not self._h:
            raise self._closed_error()
        if not end._h:
            raise end._closed_error()
        ms = c_float()
        status = _lib.lib.qd_event_elapsed_ms(self._h, end._h, byref(ms))
        if status:
            raise _err(status, self._ctx)
        return ms.value

    def __sub__(self, start: "Event") -> float:
        if not isinstance(start, Event):
            return NotImplemented
        return start.elapsed_ms(self)


# ----------------------------------------------------------------------------------------------
# Modules and kernels
# ----------------------------------------------------------------------------------------------


class Module(_ContextChild):
    """A loaded module (``Context.load_module``). ``close()`` unloads it, which closes every
    Kernel taken from it; queued work keeps the code alive until it completes."""

    __slots__ = ("_h", "_c", "_key", "_ctx", "_kernels", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("load modules with Context.load_module()")

    def __repr__(self) -> str:
        return f"<qd.Module {'closed' if not self._h else hex(self._h)}>"

    def _closed_error(self) -> ObjectClosedError:
        return ObjectClosedError(f"this qd.Module (handle {self._key:#x}) was unloaded")

    def get_kernel(self, name: str) -> "Kernel":
        """Find a kernel by name (``qd_kernel_get``).

        Raises:
            NotFoundError: the module has no kernel of that name.
        """
        if not self._h:
            raise self._closed_error()
        if isinstance(name, str):
            raw_name = name.encode("utf-8")
        elif isinstance(name, bytes):
            raw_name = name
        else:
            raise ArgumentTypeError(f"name must be a str, not {type(name).__name__}")
        out = c_uint64()
        status = _lib.lib.qd_kernel_get(self._h, raw_name, byref(out))
        if status:
            raise _err(status, self._ctx)
        k = _new_kernel(self._ctx, out, raw_name.decode("utf-8", "replace"), self)
        self._kernels.add(k)
        return k

    _destroy = staticmethod(_f_module_unload)

    def close(self) -> None:
        """Unload the module; its kernels become closed. Idempotent."""
        self._close()

    def _after_close(self) -> None:
        for k in list(self._kernels):
            k._h = 0
            k._c = _C_ZERO

    unload = close


def _new_kernel(ctx: Context, c: c_uint64, name: str, module: Optional[Module]) -> "Kernel":
    k = object.__new__(Kernel)
    k._h = k._key = c.value
    k._c = c
    k._ctx = ctx
    k._module = module
    k._name = name
    k._configs = {}
    return k


def kernel_arg(args: Any, index: int, ctype: Any = c_uint64) -> Any:
    """In a Python host kernel: the value of argument ``index`` read as ``ctype``."""
    return ctype.from_address(args[index]).value


class Kernel(_ContextChild):
    """A kernel: from ``Module.get_kernel`` or ``Kernel.from_host_fn`` (CPU only).

    Launch it with ``kernel.launch(*args, grid=, block=, stream=)``, or pre-pack a launch with
    ``kernel.prepare(*args, grid=, block=)`` and call the Launcher with ``stream=``.

    Kernel arguments (each becomes one qd_arg, copied by qd before the launch returns):

    ============================================  ==========================================
    Python value                                  passed as
    ============================================  ==========================================
    ``int`` (and objects with ``__index__``)      ``uint64_t``; must be 0..2**64-1
    ``float``                                     ``double``
    ``DeviceBuffer`` / ``HostBuffer``             its address, ``uint64_t``
    a ctypes instance (``c_uint32(5)``,           its bytes, ``sizeof`` of it: use these for
    ``c_float(1.0)``, a Structure, an array)      32-bit, signed, float and by-value structs
    ``bool``, ``None``, str, bytes, others        rejected (ArgumentTypeError)
    ============================================  ==========================================
    """

    __slots__ = ("_h", "_c", "_key", "_ctx", "_module", "_name", "_configs", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("get kernels with Module.get_kernel() or Kernel.from_host_fn()")

    @classmethod
    def from_host_fn(cls, ctx: Context, fn: Callable[..., Optional[int]],
                     name: Optional[str] = None) -> "Kernel":
        """Make a CPU kernel from a host function (``qd_kernel_from_host_fn``).

        ``fn`` is a ``qd.HostKernelFn`` (a ctypes CFUNCTYPE) or a Python callable
        ``fn(info: qd.HostKernelInfo, args) -> None | int`` run once per block on a worker
        thread (it takes the GIL). Read argument ``i`` with ``qd.kernel_arg(args, i, ctype)``.
        Returning non-zero, or raising, is a device fault: the context becomes lost, and the
        exception is the ``__cause__`` of the DeviceLostError that follows. The callable stays
        alive until the context is destroyed.

        Raises:
            NotSupportedError: ``ctx`` is not a CPU context.
        """
        if not isinstance(ctx, Context):
            raise HandleTypeError(f"ctx must be a qd.Context, not {type(ctx).__name__}")
        ctx._check_open()
        if isinstance(fn, _lib.HostKernelFn):
            cfn = fn
        elif callable(fn):
            errors = ctx._cb_errors

            def host_kernel(info: Any, args: Any) -> int:
                try:
                    result = fn(info.contents, args)
                    return 0 if not result else 1
                except BaseException as exc:
                    try:
                        errors.append(exc)
                    except BaseException:
                        pass
                    return 1

            cfn = _lib.HostKernelFn(host_kernel)
        else:
            raise ArgumentTypeError(f"fn must be callable, not {type(fn).__name__}")
        if name is None:
            name = getattr(fn, "__name__", None)
        raw_name = name.encode("utf-8") if isinstance(name, str) else None
        out = c_uint64()
        status = _lib.lib.qd_kernel_from_host_fn(ctx._h, cfn, raw_name, byref(out))
        if status:
            raise _err(status, ctx)
        ctx._keep.append(cfn)
        return _new_kernel(ctx, out, name or "", None)

    @property
    def name(self) -> str:
        """The kernel name (the symbol, or the host function's name)."""
        return self._name

    def __repr__(self) -> str:
        return f"<qd.Kernel {self._name!r} {'closed' if not self._h else hex(self._h)}>"

    def _closed_error(self) -> ObjectClosedError:
        return ObjectClosedError(
            f"this qd.Kernel {self._name!r} (handle {self._key:#x}) was closed or its module "
            "was unloaded")

    _destroy = staticmethod(_f_kernel_destroy)

    def close(self) -> None:
        """Destroy the kernel handle; queued work with it still runs. Idempotent."""
        self._close()

    def _config_ref(self, grid: Any, block: Any, shared_mem: Any) -> Any:
        """``byref`` of the launch config, cached per (grid, block, shared_mem)."""
        # Cache only exact ints and tuples of ints: 1.0 == 1 must not hit a cached config.
        if type(grid) is int and type(block) is int and type(shared_mem) is int:
            key: Any = (grid, block, shared_mem)
        elif _cacheable(grid) and _cacheable(block) and type(shared_mem) is int:
            key = (grid, block, shared_mem)
        else:
            return byref(_make_config(grid, block, shared_mem))
        ref = self._configs.get(key)
        if ref is None:
            ref = byref(_make_config(grid, block, shared_mem))
            if len(self._configs) < 64:
                self._configs[key] = ref
        return ref

    def launch(self, *args: Any, grid: Union[int, Sequence[int]] = 1,
               block: Union[int, Sequence[int]] = 1, shared_mem: int = 0,
               stream: Stream) -> None:
        """Queue the kernel on ``stream`` (``qd_launch``). ``stream`` is required.

        Args:
            *args: kernel arguments (see the class docstring for the mapping).
            grid, block: an int or a sequence of 1 to 3 ints (x, y, z); each at least 1.
            shared_mem: bytes of shared memory per block.
        """
        sc = _stream_c(stream)
        if not self._h:
            raise self._closed_error()
        cfg = self._config_ref(grid, block, shared_mem)
        if not args:
            status = _f_launch(sc, self._c, cfg, None, _C_U32[0])
        else:
            n = len(args)
            scratch = _scratch_tls.scratch
            if scratch is None:
                scratch = _scratch_tls.scratch = _Scratch()
            if n <= MAX_ARGS and not scratch.busy:
                # qd copies the values before qd_launch returns, so this thread's scratch
                # arrays can be reused at once: no per-launch allocation for 8-byte values.
                scratch.busy = True
                try:
                    scratch.fill(args)
                    status = _f_launch(sc, self._c, cfg, scratch.arr, _C_U32[n])
                finally:
                    scratch.reset()
            else:
                arr, keep = _pack_args(args)
                status = _f_launch(sc, self._c, cfg, arr,
                                   _C_U32[n] if n <= MAX_ARGS else c_uint32(n))
                del keep  # the values arr points into lived until here
        if status:
            raise _err(status, self._ctx)

    def prepare(self, *args: Any, grid: Union[int, Sequence[int]] = 1,
                block: Union[int, Sequence[int]] = 1, shared_mem: int = 0) -> "Launcher":
        """Pre-pack a launch: the returned Launcher holds the qd_arg array and the config, so
        ``launcher(stream=s)`` is a single foreign call.

        The Launcher keeps its argument values as ctypes objects (``launcher.args``); changing
        one in place (``launcher.args[1].value = 7``) changes the next launches.
        """
        if not self._h:
            raise self._closed_error()
        return Launcher(self, args, _make_config(grid, block, shared_mem))


def _cacheable(v: Any) -> bool:
    t = type(v)
    return t is int or (t is tuple and all(type(e) is int for e in v))


def _dims(value: Any, what: str) -> Tuple[int, int, int]:
    if type(value) is int or not isinstance(value, (tuple, list)):
        return (_u32(value, what), 1, 1)
    if not 1 <= len(value) <= 3:
        raise InvalidArgumentError(f"{what} must have 1 to 3 dimensions, not {len(value)}")
    dims = [_u32(v, what) for v in value] + [1] * (3 - len(value))
    return (dims[0], dims[1], dims[2])


def _make_config(grid: Any, block: Any, shared_mem: Any) -> _lib.LaunchConfig:
    cfg = _lib.LaunchConfig()
    cfg.grid[:] = _dims(grid, "grid")
    cfg.block[:] = _dims(block, "block")
    cfg.shared_mem_bytes = _u32(shared_mem, "shared_mem")
    return cfg


_CDATA = ctypes.c_int.__mro__[-2]  # _ctypes._CData: the base of every ctypes instance


def _arg_value(a: Any, i: int) -> Any:
    """One kernel argument as a ctypes object whose bytes are the argument's value."""
    t = type(a)
    if t is int:
        if 0 <= a <= _U64_MAX:
            return c_uint64(a)
        raise ArgumentRangeError(
            f"kernel argument {i} = {a} does not fit uint64_t; pass ctypes.c_int64(...) for a "
            "signed value")
    if t is float:
        return c_double(a)
    if isinstance(a, _CDATA):
        return a
    if isinstance(a, (DeviceBuffer, HostBuffer)):
        a._check()
        return c_uint64(a._address)
    if t is bool or a is None or isinstance(a, (str, bytes, bytearray, memoryview, float)):
        raise ArgumentTypeError(
            f"kernel argument {i}: {t.__name__} has no C type; pass a ctypes instance "
            "(e.g. ctypes.c_uint8(1), ctypes.c_float(x))")
    try:
        v = operator.index(a)
    except TypeError:
        raise ArgumentTypeError(
            f"kernel argument {i}: cannot pass {t.__name__}; use an int, a float, a qd buffer "
            "or a ctypes instance") from None
    return _arg_value(v, i)


class _Scratch:
    """Per-thread argument storage for ``Kernel.launch``: 64 eight-byte value slots and a
    qd_arg array pointing at them. Slots re-pointed at a ctypes instance are reset after the
    launch (qd has copied every value by then)."""

    __slots__ = ("vals", "dbls", "arr", "base", "moved", "busy")

    def __init__(self) -> None:
        self.vals = (c_uint64 * MAX_ARGS)()
        self.dbls = (c_double * MAX_ARGS).from_buffer(self.vals)
        self.arr = (_lib.Arg * MAX_ARGS)()
        self.base = ctypes.addressof(self.vals)
        self.moved: List[int] = []
        self.busy = False
        for i, slot in enumerate(self.arr):
            slot.data = self.base + 8 * i
            slot.size = 8

    def fill(self, args: Sequence[Any]) -> None:
        vals = self.vals
        for a in args:
            if type(a) is not int:
                break
        else:  # only ints: one C-level copy, once they are known to fit uint64
            if min(args) >= 0 and max(args) <= _U64_MAX:
                vals[:len(args)] = args
                return
        i = 0
        for a in args:
            t = type(a)
            if t is int and 0 <= a <= _U64_MAX:
                vals[i] = a
            elif t is float:
                self.dbls[i] = a
            elif t is DeviceBuffer or t is HostBuffer:
                a._check()
                vals[i] = a._address
            else:
                v = _arg_value(a, i)
                if type(v) is c_uint64:
                    vals[i] = v.value
                else:  # a ctypes instance of its own size: point the slot at it
                    slot = self.arr[i]
                    slot.data = ctypes.addressof(v)
                    slot.size = sizeof(v)
                    self.moved.append(i)
            i += 1

    def reset(self) -> None:
        if self.moved:
            for i in self.moved:
                slot = self.arr[i]
                slot.data = self.base + 8 * i
                slot.size = 8
            self.moved.clear()
        self.busy = False


class _ScratchPerThread(threading.local):
    scratch: Optional[_Scratch] = None


_scratch_tls = _ScratchPerThread()


def _pack_args(args: Sequence[Any]) -> Tuple[Any, List[Any]]:
    """(qd_arg array, the ctypes objects it points into)."""
    values = [_arg_value(a, i) for i, a in enumerate(args)]
    arr = (_lib.Arg * len(values))()
    for slot, v in zip(arr, values):
        slot.data = ctypes.addressof(v)
        slot.size = sizeof(v)
    return arr, values


class Launcher:
    """A pre-packed launch (``Kernel.prepare``): ``launcher(stream=s)`` is one foreign call."""

    __slots__ = ("_kernel", "_kc", "_cfg", "_cfg_ref", "_arr", "_n", "_values")

    def __init__(self, kernel: Kernel, args: Sequence[Any], config: _lib.LaunchConfig) -> None:
        self._kernel = kernel
        self._kc = kernel._c
        self._cfg = config
        self._cfg_ref = byref(config)
        if args:
            self._arr, self._values = _pack_args(args)
        else:
            self._arr, self._values = None, []
        n = len(self._values)
        self._n = _C_U32[n] if n <= MAX_ARGS else c_uint32(n)

    @property
    def kernel(self) -> Kernel:
        """The kernel this launcher launches."""
        return self._kernel

    @property
    def args(self) -> Tuple[Any, ...]:
        """The ctypes objects holding the argument values (mutable in place)."""
        return tuple(self._values)

    def __call__(self, *, stream: Stream) -> None:
        """Queue the pre-packed launch on ``stream`` (required)."""
        if not isinstance(stream, Stream):
            raise _stream_type_error(stream)
        if not stream._h:
            raise stream._closed_error()
        kernel = self._kernel
        if not kernel._h:
            raise kernel._closed_error()
        status = _f_launch(stream._c, self._kc, self._cfg_ref, self._arr, self._n)
        if status:
            raise _err(status, kernel._ctx)

    launch = __call__

    def __repr__(self) -> str:
        return f"<qd.Launcher {self._kernel._name!r} args={len(self._values)}>"


class Task:
    """One task of ``launch_parallel``: tasks of one ``group`` run in order on one pooled
    stream; different groups run concurrently. The arguments are packed at construction."""

    __slots__ = ("kernel", "group", "_cfg", "_arr", "_values")

    def __init__(self, kernel: Kernel, *args: Any, grid: Union[int, Sequence[int]] = 1,
                 block: Union[int, Sequence[int]] = 1, shared_mem: int = 0,
                 group: int = 0) -> None:
        if not isinstance(kernel, Kernel):
            raise HandleTypeError(f"kernel must be a qd.Kernel, not {type(kernel).__name__}")
        self.kernel = kernel
        self.group = _u32(group, "group")
        self._cfg = _make_config(grid, block, shared_mem)
        if args:
            self._arr, self._values = _pack_args(args)
        else:
            self._arr, self._values = None, []

    def __repr__(self) -> str:
        return f"<qd.Task group={self.group} {self.kernel._name!r} args={len(self._values)}>"


def _as_task(t: Any) -> Task:
    if isinstance(t, Task):
        return t
    if isinstance(t, tuple) and len(t) == 5:
        group, kernel, grid, block, args = t
        return Task(kernel, *args, grid=grid, block=block, group=group)
    raise ArgumentTypeError(
        f"tasks must be qd.Task or (group, kernel, grid, block, args) tuples, not {t!r}")


_ARG_PTR = POINTER(_lib.Arg)


def launch_parallel(tasks: Iterable[Union[Task, Tuple[int, Kernel, Any, Any, Sequence[Any]]]],
                    *, stream: Stream) -> None:
    """Stream-parallel launch (``qd_launch_parallel``): every task starts after the work
    already queued on ``stream``, and ``stream`` waits for all of them; no host sync.

    Raises:
        PoolExhaustedError: no stream of the pool is free (nothing is queued).
    """
    sc = _stream_c(stream)
    items = [_as_task(t) for t in tasks]
    arr = (_lib.Task * len(items))()
    size = sizeof(_lib.Task)
    for slot, t in zip(arr, items):
        k = t.kernel
        if not k._h:
            raise k._closed_error()
        slot.struct_size = size
        slot.group = t.group
        slot.kernel = k._h
        slot.config = t._cfg
        if t._arr is not None:
            slot.args = ctypes.cast(t._arr, _ARG_PTR)
            slot.num_args = len(t._values)
    status = _f_launch_parallel(sc, arr, c_uint32(len(items)))
    if status:
        raise _err(status, stream._ctx)


# ----------------------------------------------------------------------------------------------
# Host callbacks
# ----------------------------------------------------------------------------------------------


def launch_host_fn(fn: Callable[[], Any], *, stream: Stream) -> None:
    """Queue ``fn()`` on ``stream`` (``qd_launch_host_fn``): it runs on a host thread after
    all earlier work on the stream, and later work waits for it.

    ``fn`` runs with the GIL held and must not call blocking qd functions of the same context
    (they raise InvalidOperationError). If it raises, the exception is reported as a
    CallbackError by the next ``synchronize()`` on the context. ``fn`` is kept alive until it
    has run; if queuing fails it is never called.
    """
    sc = _stream_c(stream)
    if not callable(fn):
        raise ArgumentTypeError(f"fn must be callable, not {type(fn).__name__}")
    status = _enqueue(sc, fn, stream._ctx._cb_errors)
    if status:
        raise _err(status, stream._ctx)


# ----------------------------------------------------------------------------------------------
# Memory
# ----------------------------------------------------------------------------------------------


class DeviceBuffer:
    """Device memory from ``qd.alloc`` (stream-ordered). Usable wherever an address is: as a
    kernel argument, in memcpy / memset, and as an int (``int(buf)``, ``buf.address``).

    Free it with ``qd.free(buf, stream=)`` or ``buf.free(stream=)``; whatever is left is freed
    when the context closes. It is not freed by garbage collection: a free must be ordered on
    the stream that last uses the memory, which only the caller knows.
    """

    __slots__ = ("_address", "_size", "_ctx", "_freed")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("allocate device memory with qd.alloc(nbytes, stream=...)")

    @property
    def address(self) -> int:
        """The device address (on the CPU backend, a host pointer)."""
        return self._address

    @property
    def size(self) -> int:
        """The size in bytes."""
        return self._size

    @property
    def context(self) -> Context:
        """The context the memory belongs to."""
        return self._ctx

    @property
    def freed(self) -> bool:
        """Whether ``free`` was called (or the context closed) for it."""
        return self._freed

    def __index__(self) -> int:
        return self._address

    __int__ = __index__

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return f"<qd.DeviceBuffer {self._address:#x} {self._size} bytes{state}>"

    def _check(self) -> None:
        if self._freed:
            raise InvalidAddressError(
                f"DeviceBuffer {self._address:#x} was freed (or its context closed)")
        if not self._ctx._h:
            self._freed = True
            raise InvalidAddressError(
                f"DeviceBuffer {self._address:#x} was freed when its qd.Context closed")

    def free(self, *, stream: Stream) -> None:
        """Free in stream order; same as ``qd.free(self, stream=stream)``."""
        free(self, stream=stream)


class HostBuffer:
    """Pinned host memory from ``Context.host_alloc``. ``view`` is a writable memoryview of
    it (valid until ``close()``). Usable as an address (``int(buf)``) and in memcpy / memset."""

    __slots__ = ("_ctx", "_address", "_size")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("allocate pinned host memory with Context.host_alloc(nbytes)")

    @property
    def address(self) -> int:
        """The host address (0 once freed)."""
        return self._address

    @property
    def size(self) -> int:
        """The size in bytes."""
        return self._size

    @property
    def closed(self) -> bool:
        """Whether the memory was freed."""
        return not self._address

    def __index__(self) -> int:
        return self._address

    __int__ = __index__

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        state = "freed" if not self._address else hex(self._address)
        return f"<qd.HostBuffer {state} {self._size} bytes>"

    def _check(self) -> None:
        if not self._address:
            raise InvalidAddressError("this qd.HostBuffer was freed")
        if not self._ctx._h:
            self._address = 0
            raise InvalidAddressError("this qd.HostBuffer was freed when its qd.Context closed")

    @property
    def view(self) -> memoryview:
        """A writable byte view of the memory. Do not use it after ``close()``."""
        self._check()
        return memoryview((ctypes.c_ubyte * self._size).from_address(self._address)).cast("B")

    def close(self) -> None:
        """Free the memory at once (``qd_host_free``): synchronize any work using it first.
        Idempotent."""
        addr = self._address
        if not addr:
            return
        self._address = 0
        if not self._ctx._h:
            return  # freed by the context
        status = _lib.lib.qd_host_free(self._ctx._h, addr)
        if status and status != Status.ERROR_INVALID_HANDLE:
            raise _err(status, self._ctx)

    free = close

    def __enter__(self) -> "HostBuffer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def alloc(nbytes: int, *, stream: Stream) -> DeviceBuffer:
    """Allocate ``nbytes`` of device memory in stream order (``qd_mem_alloc_async``): work
    queued on ``stream`` after this call may use it.

    Raises:
        InvalidArgumentError: ``nbytes`` is 0.
        QdOverflowError: ``nbytes`` exceeds what the backend can address.
        OutOfMemoryError: memory is exhausted.
    """
    sc = _stream_c(stream)
    n = _u64(nbytes, "nbytes")
    out = c_uint64()
    status = _f_alloc(sc, c_uint64(n), byref(out))
    if status:
        raise _err(status, stream._ctx)
    buf = object.__new__(DeviceBuffer)
    buf._address = out.value
    buf._size = n
    buf._ctx = stream._ctx
    buf._freed = False
    return buf


def free(memory: Union[DeviceBuffer, int], *, stream: Stream) -> None:
    """Free device memory in stream order (``qd_mem_free_async``): it is released after all
    work queued on ``stream`` so far has completed.

    Raises:
        InvalidAddressError: not the start of a live allocation of this context.
    """
    sc = _stream_c(stream)
    if isinstance(memory, DeviceBuffer):
        memory._check()
        address = memory._address
    else:
        address = _u64(memory, "address")
    status = _f_free(sc, c_uint64(address))
    if status:
        raise _err(status, stream._ctx)
    if isinstance(memory, DeviceBuffer):
        memory._freed = True


# Python buffers (bytes, bytearray, memoryview, array.array, mmap, ...) as host memory. The
# buffer is exported with PyObject_GetBuffer (so a bytearray cannot be resized meanwhile) and
# released by a host callback queued right after the copy, once the copy has run.


class _PyBuffer(Structure):
    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", c_ssize_t),
                ("itemsize", c_ssize_t), ("readonly", c_int), ("ndim", c_int),
                ("format", c_void_p), ("shape", c_void_p), ("strides", c_void_p),
                ("suboffsets", c_void_p), ("internal", c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, POINTER(_PyBuffer), c_int]
_get_buffer.restype = c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [POINTER(_PyBuffer)]
_release_buffer.restype = None
_PyBUF_SIMPLE, _PyBUF_WRITABLE = 0, 1


class _HostView:
    """A contiguous Python buffer, exported until ``release()``."""

    __slots__ = ("_view", "address", "size", "__weakref__")

    def __init__(self, obj: Any, writable: bool, what: str) -> None:
        view = _PyBuffer()
        try:
            _get_buffer(obj, byref(view), _PyBUF_WRITABLE if writable else _PyBUF_SIMPLE)
        except BufferError as exc:  # read-only where writable is needed, or not contiguous
            need = "a writable, C-contiguous" if writable else "a C-contiguous"
            raise ArgumentTypeError(
                f"{what} must be {need} buffer; {type(obj).__name__} is not ({exc})") from None
        except TypeError:
            raise ArgumentTypeError(
                f"{what} must be an address (int), a qd buffer or a buffer (bytes, bytearray, "
                f"memoryview, array), not {type(obj).__name__}") from None
        self._view = view
        self.address = view.buf or 0
        self.size = view.len

    def release(self) -> None:
        view, self._view = self._view, None
        if view is not None:
            _release_buffer(byref(view))

    def __del__(self) -> None:
        try:
            self.release()
        except BaseException:
            pass


_leaked_views: List[_HostView] = []  # views whose copy could be neither waited for nor released


def _operand(x: Any, writable: bool, what: str) -> Tuple[int, Optional[int], Optional[_HostView]]:
    """(address, size or None, exported Python buffer or None) of a memcpy/memset side."""
    t = type(x)
    if t is int:
        return _u64(x, what), None, None
    if isinstance(x, (DeviceBuffer, HostBuffer)):
        x._check()
        return x._address, x._size, None
    if x is None or t is bool or isinstance(x, (float, str)):
        raise ArgumentTypeError(
            f"{what} must be an address (int), a qd buffer or a buffer, not {t.__name__}")
    if hasattr(t, "__index__"):  # an int-like address (e.g. a numpy integer)
        try:
            return _u64(operator.index(x), what), None, None
        except TypeError:
            pass
    view = _HostView(x, writable, what)
    return view.address, view.size, view


def _resolve_size(nbytes: Optional[int], sizes: Sequence[Optional[int]]) -> int:
    if nbytes is not None:
        return _u64(nbytes, "nbytes")
    known = {s for s in sizes if s is not None}
    if not known:
        raise ArgumentTypeError("nbytes is required when no side has a known size")
    if len(known) > 1:
        raise InvalidArgumentError(
            f"the sides have different sizes {sorted(known)}; pass nbytes= explicitly")
    return known.pop()


def _finish_host_copy(stream: Stream, views: List[_HostView]) -> None:
    """Release exported Python buffers once the queued copy has run (a host callback)."""
    def release() -> None:
        for v in views:
            v.release()

    status = _enqueue(stream._c, release, stream._ctx._cb_errors)
    if status:
        try:  # cannot queue the release: wait for the copy instead
            stream.synchronize()
            release()
        except BaseException:
            _leaked_views.extend(views)  # never release memory a copy may still touch


def memcpy(dst: Any, src: Any, nbytes: Optional[int] = None, *, stream: Stream) -> None:
    """Copy ``nbytes`` from ``src`` to ``dst`` in stream order (``qd_memcpy_async``).

    Each side is an address (int), a DeviceBuffer / HostBuffer, or a C-contiguous Python
    buffer (bytes, bytearray, memoryview, array.array, ...; ``dst`` must be writable). A Python
    buffer stays exported (and alive) until the copy has run; read ``dst`` only after
    synchronizing. ``nbytes`` defaults to the size of the side(s) whose size is known.

    Raises:
        InvalidAddressError: ``nbytes`` runs past the end of a buffer or allocation.
        QdOverflowError: an address + nbytes wraps around.
    """
    sc = _stream_c(stream)
    d, dsize, dview = _operand(dst, True, "dst")
    try:
        s, ssize, sview = _operand(src, False, "src")
    except BaseException:
        if dview is not None:
            dview.release()
        raise
    views = [v for v in (dview, sview) if v is not None]
    try:
        n = _resolve_size(nbytes, (dsize, ssize))
        for view, name in ((dview, "dst"), (sview, "src")):
            if view is not None and n > view.size:
                raise InvalidAddressError(
                    f"{name}: {n} bytes run past the end of a {view.size}-byte buffer")
        status = _f_memcpy(sc, c_uint64(d), c_uint64(s), c_uint64(n))
        if status:
            raise _err(status, stream._ctx)
    except BaseException:
        for v in views:
            v.release()
        raise
    if views:
        _finish_host_copy(stream, views)


def memset(dst: Any, value: int, nbytes: Optional[int] = None, *, stream: Stream) -> None:
    """Set ``nbytes`` bytes at ``dst`` to ``value`` (0..255) in stream order
    (``qd_memset_async``). ``dst`` is as for memcpy; ``nbytes`` defaults to its size."""
    sc = _stream_c(stream)
    v = _int(value, 0, _U8_MAX, "uint8_t", "value")
    d, dsize, dview = _operand(dst, True, "dst")
    try:
        n = _resolve_size(nbytes, (dsize,))
        if dview is not None and n > dview.size:
            raise InvalidAddressError(
                f"dst: {n} bytes run past the end of a {dview.size}-byte buffer")
        status = _f_memset(sc, c_uint64(d), c_uint8(v), c_uint64(n))
        if status:
            raise _err(status, stream._ctx)
    except BaseException:
        if dview is not None:
            dview.release()
        raise
    if dview is not None:
        _finish_host_copy(stream, [dview])
