"""DeviceBuffer, HostBuffer, alloc/free, memcpy/memset, and Python buffers as host memory."""

from __future__ import annotations

import ctypes
import operator
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_int,
    c_ssize_t,
    c_uint8,
    c_uint64,
    c_void_p,
)
from typing import (
    TYPE_CHECKING,
    Any,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _lib
from ._lib import C as _C, U8 as _U8, U64 as _U64, ref as _ref
from ._errors import (
    ArgumentTypeError,
    InvalidAddressError,
    InvalidArgumentError,
    Status,
    WrongContextError,
)
from ._base import (
    _U8_MAX,
    _NoCopy,
    _err,
    _f_alloc,
    _f_free,
    _f_memcpy,
    _f_memcpy_peer,
    _f_memset,
    _int,
    _u64,
)
from ._callbacks import _capture_keeps, _enqueue
from ._stream import Stream, _as_stream, _stream_c
from . import _interop
from ._interop import DeviceArray

if TYPE_CHECKING:
    from ._context import Context


# ----------------------------------------------------------------------------------------------
# Memory
# ----------------------------------------------------------------------------------------------


class DeviceBuffer(_NoCopy):
    """Device memory from ``qd.alloc`` (stream-ordered). Usable wherever an address is: as a
    kernel argument, in memcpy / memset, and as an int (``int(buf)``, ``buf.address``).

    Free it with ``qd.free(buf, stream=)`` or ``buf.free(stream=)``; whatever is left is freed
    when the context closes. It is not freed by garbage collection: a free must be ordered on
    the stream that last uses the memory, which only the caller knows.
    """

    __slots__ = ("_address", "_size", "_ctx", "_freed", "_stream")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("allocate device memory with qd.alloc(nbytes, stream=...)")

    # -- zero-copy interop (qd/_interop.py) -------------------------------------------------

    @property
    def stream(self) -> Stream:
        """The stream consumers of ``__cuda_array_interface__`` / ``__dlpack__`` are ordered
        after: the one the buffer was allocated on, until set to another (``buf.stream = s``:
        the stream whose queued work last writes the memory)."""
        return self._stream

    @stream.setter
    def stream(self, stream: Stream) -> None:
        if not isinstance(stream, Stream):
            raise ArgumentTypeError(f"stream must be a qd.Stream, not {type(stream).__name__}")
        if stream._ctx is not self._ctx:
            raise _wrong_context("stream", self, stream._ctx)
        self._stream = stream

    def view(self, dtype: Any = "uint8", shape: Any = None, *, offset: int = 0,
             stream: Optional[Stream] = None) -> "DeviceArray":
        """A typed, C-contiguous view (``DeviceArray``) of ``shape`` items of ``dtype``
        (``"float32"``, ``"<f4"``, a NumPy dtype, ...) from byte ``offset``; the whole buffer as
        a 1-D array by default. On a CUDA context ``torch.as_tensor(view, device="cuda")``,
        ``cupy.asarray(view)``, ``numba.cuda.as_cuda_array(view)`` and
        ``torch.from_dlpack(view)`` use the memory without a copy, ordered after ``stream``
        (default: the buffer's ``stream``)."""
        return DeviceArray(self, dtype, shape, offset, stream)

    @property
    def __cuda_array_interface__(self) -> dict:
        """Version 3 of the CUDA array interface (CUDA contexts only; elsewhere the attribute
        is absent): the buffer as 1-D ``uint8``, with ``stream`` = the native handle of
        ``buf.stream``. Use ``buf.view(dtype, shape)`` for typed data."""
        return _interop._cai(self, self._address, (self._size,), "|u1", self._stream)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """DLPack: ``(kDLCUDA, device)`` on CUDA, ``(kDLCPU, 0)`` on the CPU backend."""
        return _interop._dlpack_device(self)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """DLPack export of the buffer as 1-D ``uint8`` (a ``dltensor`` capsule; no copy). On
        CUDA, the consumer's ``stream`` (a CUstream int; 1 or None: the legacy default
        stream; -1: no ordering) is made to wait for ``buf.stream`` with a qd event."""
        return _interop._dlpack(self, self._address, (self._size,), "|u1", self._stream,
                                stream, max_version, dl_device, copy)

    @property
    def address(self) -> int:
        """The device address (on the CPU backend, a host pointer); 0 once freed (by
        ``free``, or by closing its context)."""
        return 0 if self._freed or not self._ctx._h else self._address

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
        """Whether ``free`` was called for it, or its context closed (which frees it)."""
        return self._freed or not self._ctx._h

    def __index__(self) -> int:
        """The address; a freed buffer raises InvalidAddressError."""
        self._check()
        return self._address

    __int__ = __index__

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        state = " freed" if self.freed else ""
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


class HostBuffer(_NoCopy):
    """Pinned host memory from ``Context.host_alloc``. ``view`` is a writable memoryview of
    it (valid until ``close()``). Usable as an address (``int(buf)``) and in memcpy / memset."""

    __slots__ = ("_ctx", "_address", "_size")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("allocate pinned host memory with Context.host_alloc(nbytes)")

    @property
    def address(self) -> int:
        """The host address (0 once freed, by ``close()`` or by closing its context)."""
        return self._address if self._ctx._h else 0

    @property
    def size(self) -> int:
        """The size in bytes."""
        return self._size

    @property
    def closed(self) -> bool:
        """Whether the memory was freed (by ``close()``, or by closing its context)."""
        return not self._address or not self._ctx._h

    def __index__(self) -> int:
        """The address; a freed buffer raises InvalidAddressError."""
        self._check()
        return self._address

    __int__ = __index__

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        state = "freed" if self.closed else hex(self._address)
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
        status = _C.qd_host_free(self._ctx._h, _lib.ptr(addr))
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
    status = _f_alloc(sc, _U64(n), _ref(out))
    if status:
        raise _err(status, stream._ctx)
    buf = object.__new__(DeviceBuffer)
    buf._address = out.value
    buf._size = n
    buf._ctx = stream._ctx
    buf._freed = False
    buf._stream = stream
    return buf


def free(memory: Union[DeviceBuffer, int], *, stream: Stream) -> None:
    """Free device memory in stream order (``qd_mem_free_async``): it is released after all
    work queued on ``stream`` so far has completed.

    Raises:
        InvalidAddressError: not the start of a live allocation of this context.
    """
    if not isinstance(stream, Stream):
        stream = _as_stream(stream, memory._ctx if isinstance(memory, DeviceBuffer) else None)
    sc = _stream_c(stream)
    if isinstance(memory, DeviceBuffer):
        memory._check()
        address = memory._address
    else:
        address = _u64(memory, "address")
    status = _f_free(sc, _U64(address))
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


def _buffer_context(*sides: Any) -> Optional["Context"]:
    """The context of the first DeviceBuffer or HostBuffer among ``sides`` (which context a
    foreign ``stream=`` is imported into), or None."""
    for x in sides:
        if isinstance(x, (DeviceBuffer, HostBuffer)):
            return x._ctx
    return None


def _wrong_context(what: str, buf: "DeviceBuffer", ctx: "Context") -> WrongContextError:
    return WrongContextError(
        f"{what}: this DeviceBuffer belongs to {buf._ctx!r}, not to {ctx!r} of the stream (copy "
        "between contexts with qd.memcpy_peer(dst, src, stream=...); a raw int address is "
        "passed to C unchecked)")


def _operand(x: Any, writable: bool, what: str,
             ctx: "Context") -> Tuple[int, Optional[int], Optional[_HostView]]:
    """(address, size or None, exported Python buffer or None) of a memcpy/memset side on a
    stream of ``ctx``."""
    t = type(x)
    if t is int:
        return _u64(x, what), None, None
    if isinstance(x, (DeviceBuffer, HostBuffer)):
        x._check()
        if x._ctx is not ctx and isinstance(x, DeviceBuffer):
            raise _wrong_context(what, x, ctx)
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
    keeps = _capture_keeps(stream)
    if keeps is not None:  # captured: every replay copies again, so the graph holds them
        for keep in keeps:
            keep.items.extend(views)
        return

    def release() -> None:
        for v in views:
            v.release()

    status = _enqueue(stream, release, stream._ctx._cb_errors)
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
    if not isinstance(stream, Stream):
        stream = _as_stream(stream, _buffer_context(dst, src))
    sc = _stream_c(stream)
    d, dsize, dview = _operand(dst, True, "dst", stream._ctx)
    try:
        s, ssize, sview = _operand(src, False, "src", stream._ctx)
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
        status = _f_memcpy(sc, _U64(d), _U64(s), _U64(n))
        if status:
            raise _err(status, stream._ctx)
    except BaseException:
        for v in views:
            v.release()
        raise
    if views:
        _finish_host_copy(stream, views)


def memcpy_peer(dst: Union[DeviceBuffer, HostBuffer], src: Union[DeviceBuffer, HostBuffer],
                nbytes: Optional[int] = None, *, stream: Stream) -> None:
    """Copy ``nbytes`` from ``src`` to ``dst``, buffers of two contexts of one backend (two
    GPUs, or two CPU contexts), in stream order on ``stream``, a stream of either buffer's
    context (``qd_memcpy_peer_async``). Each buffer names its own context, and each range is
    checked against that context's allocations. Order the other context's work with events
    (``stream.wait(event)`` accepts an event of another context). ``nbytes`` defaults to the
    buffers' size. Not captured in graphs.

    Raises:
        WrongContextError: ``stream`` belongs to neither buffer's context, or the buffers'
            contexts are of different backends.
        InvalidAddressError: ``nbytes`` runs past the end of a buffer.
    """
    if not isinstance(stream, Stream):
        raise ArgumentTypeError(
            f"stream must be a qd.Stream, not {type(stream).__name__} (stream= is required)")
    sc = _stream_c(stream)
    for side, name in ((dst, "dst"), (src, "src")):
        if not isinstance(side, (DeviceBuffer, HostBuffer)):
            raise ArgumentTypeError(
                f"{name} must be a qd.DeviceBuffer or qd.HostBuffer (it names its context), "
                f"not {type(side).__name__}")
        side._check()
    n = _resolve_size(nbytes, (dst._size, src._size))
    status = _f_memcpy_peer(sc, _U64(dst._address), dst._ctx._c, _U64(src._address),
                            src._ctx._c, _U64(n))
    if status:
        raise _err(status, stream._ctx)


def memset(dst: Any, value: int, nbytes: Optional[int] = None, *, stream: Stream) -> None:
    """Set ``nbytes`` bytes at ``dst`` to ``value`` (0..255) in stream order
    (``qd_memset_async``). ``dst`` is as for memcpy; ``nbytes`` defaults to its size."""
    if not isinstance(stream, Stream):
        stream = _as_stream(stream, _buffer_context(dst))
    sc = _stream_c(stream)
    v = _int(value, 0, _U8_MAX, "uint8_t", "value")
    d, dsize, dview = _operand(dst, True, "dst", stream._ctx)
    try:
        n = _resolve_size(nbytes, (dsize,))
        if dview is not None and n > dview.size:
            raise InvalidAddressError(
                f"dst: {n} bytes run past the end of a {dview.size}-byte buffer")
        status = _f_memset(sc, _U64(d), _U8(v), _U64(n))
        if status:
            raise _err(status, stream._ctx)
    except BaseException:
        if dview is not None:
            dview.release()
        raise
    if dview is not None:
        _finish_host_copy(stream, [dview])
