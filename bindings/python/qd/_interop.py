"""Zero-copy memory interop: ``__cuda_array_interface__`` (version 3) and DLPack
(``__dlpack__`` / ``__dlpack_device__``) for DeviceBuffer and its typed views (DeviceArray), in
pure Python (the DLPack structs are ctypes mirrors, the capsule is made with
``ctypes.pythonapi``).

Ordering: each exported buffer or view names a qd stream (the one the buffer was allocated on,
unless set with ``buf.stream = s`` or ``buf.view(..., stream=s)``). ``__cuda_array_interface__``
gives its native handle as the ``stream`` entry, so a consumer that follows the protocol (CuPy,
numba, PyTorch) orders its use after the work queued there; ``__dlpack__(stream=consumer)``
makes the consumer's stream wait for it with a qd event (no host synchronisation).
"""

from __future__ import annotations

import ctypes
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint64,
    c_void_p,
)
from typing import Any, Dict, Optional, Tuple

from ._base import Backend, _index
from ._errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    NotSupportedError,
    ObjectClosedError,
    QdError,
)

# dtype names -> array-interface typestr (little-endian, as on every platform qd supports).
_TYPESTR = {
    "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
    "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float16": "<f2", "float32": "<f4",
    "float64": "<f8", "bool": "|b1",
}
_NAMES = {v: k for k, v in _TYPESTR.items()}


def typestr(dtype: Any) -> str:
    """The array-interface typestr of ``dtype``: a name (``"float32"``), a typestr
    (``"<f4"``), or an object with ``.str`` (a NumPy dtype) or a ``str()`` that is a name
    (``torch.float32`` -> ``"torch.float32"``)."""
    if isinstance(dtype, str):
        text = dtype
    elif hasattr(dtype, "str") and isinstance(dtype.str, str):
        text = dtype.str
    else:
        text = str(dtype).rsplit(".", 1)[-1]  # torch.float32 -> float32
    if text in _TYPESTR:
        return _TYPESTR[text]
    if text in _NAMES:
        return text
    if text.startswith("=") and ("<" + text[1:]) in _NAMES:
        return "<" + text[1:]
    raise ArgumentTypeError(
        f"unsupported dtype {dtype!r}: use one of {', '.join(_TYPESTR)} (or their typestr)")


def itemsize(ts: str) -> int:
    return int(ts[2:])


class DeviceArray:
    """A typed, C-contiguous view of a DeviceBuffer (``buf.view(dtype, shape)``): what
    ``torch.as_tensor``, ``cupy.asarray``, ``numba.cuda.as_cuda_array`` and
    ``torch.from_dlpack`` take without a copy on a CUDA context. It is also an address
    (``int(view)``) wherever one is accepted (kernel arguments, memcpy, memset).

    The view does not own the memory: free the buffer (``qd.free``) only after every consumer
    is done with it (consumers' tensors do not keep qd's memory alive).
    """

    __slots__ = ("buffer", "dtype", "shape", "offset", "stream")

    def __init__(self, buffer: Any, dtype: Any, shape: Any = None, offset: int = 0,
                 stream: Any = None) -> None:
        from ._memory import DeviceBuffer
        from ._stream import Stream

        if not isinstance(buffer, DeviceBuffer):
            raise ArgumentTypeError(f"buffer must be a qd.DeviceBuffer, not {type(buffer).__name__}")
        ts = typestr(dtype)
        size = itemsize(ts)
        offset = _index(offset, "offset")
        if offset < 0 or offset > buffer.size or offset % size:
            raise InvalidArgumentError(f"offset {offset} is outside the buffer or not a multiple "
                                       f"of the item size {size}")
        if shape is None:
            shape = ((buffer.size - offset) // size,)
        elif isinstance(shape, int) or hasattr(type(shape), "__index__"):
            shape = (_index(shape, "shape"),)
        elif isinstance(shape, (tuple, list)):
            shape = tuple(_index(d, "each dimension of shape") for d in shape)
        else:
            raise ArgumentTypeError(
                f"shape must be an int or a tuple of ints, not {type(shape).__name__}")
        if any(d < 0 for d in shape):
            raise InvalidArgumentError(f"negative dimension in shape {shape}")
        count = 1
        for d in shape:
            count *= d
        if offset + count * size > buffer.size:
            raise InvalidArgumentError(
                f"shape {shape} of {ts} needs {count * size} bytes from offset {offset}; the "
                f"buffer has {buffer.size}")
        if stream is not None and not isinstance(stream, Stream):
            raise ArgumentTypeError(f"stream must be a qd.Stream, not {type(stream).__name__}")
        self.buffer = buffer
        self.dtype = ts
        self.shape = shape
        self.offset = offset
        self.stream = stream

    @property
    def address(self) -> int:
        """The device address of the first item (the buffer's address + ``offset``); 0 once
        the buffer was freed."""
        base = self.buffer.address
        return base + self.offset if base else 0

    @property
    def nbytes(self) -> int:
        """The size of the view in bytes."""
        n = itemsize(self.dtype)
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        """The size of one item in bytes."""
        return itemsize(self.dtype)

    def __index__(self) -> int:
        self.buffer._check()
        return self.address

    __int__ = __index__

    def __repr__(self) -> str:
        return (f"<qd.DeviceArray {_NAMES.get(self.dtype, self.dtype)}{list(self.shape)} at "
                f"{self.address:#x}>")

    def _order_stream(self) -> Any:
        return self.stream if self.stream is not None else self.buffer.stream

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return _cai(self.buffer, self.address, self.shape, self.dtype, self._order_stream())

    def __dlpack_device__(self) -> Tuple[int, int]:
        return _dlpack_device(self.buffer)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        return _dlpack(self.buffer, self.address, self.shape, self.dtype,
                       self._order_stream(), stream, max_version, dl_device, copy)


# ----------------------------------------------------------------------------------------------
# __cuda_array_interface__ (version 3)
# ----------------------------------------------------------------------------------------------


def _require_cuda(buffer: Any, what: str) -> None:
    buffer._check()
    if buffer._ctx._backend is not Backend.CUDA:
        # AttributeError: hasattr(buf, "__cuda_array_interface__") is False off CUDA, so
        # consumers that probe for it fall back instead of failing.
        raise AttributeError(
            f"{what}: only device memory of a CUDA context is CUDA memory; this buffer is on "
            f"the {buffer._ctx._backend.name} backend")


def _native_stream(stream: Any) -> Optional[int]:
    """The protocol's value for a qd stream: its CUstream, 1 for the legacy default (0)."""
    if stream is None:
        return None
    if not stream._h or not stream._ctx._h:
        raise ObjectClosedError(
            "the stream this buffer is ordered on was closed: set an open one with "
            "buf.stream = s (or buf.view(..., stream=s)) before exporting it")
    handle = stream.native_handle
    return handle if handle else 1


def _cai(buffer: Any, address: int, shape: Tuple[int, ...], ts: str, stream: Any) -> Dict[str, Any]:
    _require_cuda(buffer, "__cuda_array_interface__")
    return {
        "version": 3,
        "shape": tuple(shape),
        "typestr": ts,
        "data": (address, False),
        "strides": None,  # C-contiguous
        "descr": [("", ts)],
        "stream": _native_stream(stream),
    }


# ----------------------------------------------------------------------------------------------
# DLPack (https://dmlc.github.io/dlpack/latest/c_api.html), version 0.x ABI (DLManagedTensor)
# ----------------------------------------------------------------------------------------------

_KDL_CPU, _KDL_CUDA = 1, 2
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLBool


class _DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", _DLDevice), ("ndim", c_int32),
                ("dtype", _DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class _DLManagedTensor(Structure):
    pass


_DELETER = CFUNCTYPE(None, POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p),
                             ("deleter", _DELETER)]

_CAPSULE_NAME = b"dltensor"  # kept alive by the module: capsules keep pointing at it
_capsule_new = ctypes.pythonapi["PyCapsule_New"]  # own objects: pythonapi.X is shared
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_void_p, c_char_p, c_void_p]
_capsule_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_capsule_is_valid.restype = c_int
_capsule_is_valid.argtypes = [c_void_p, c_char_p]
_capsule_get = ctypes.pythonapi["PyCapsule_GetPointer"]
_capsule_get.restype = c_void_p
_capsule_get.argtypes = [c_void_p, c_char_p]

#: Exported tensors not yet deleted: address of the DLManagedTensor -> what it points into.
_live: Dict[int, Any] = {}


def _delete(managed: Any) -> None:
    try:
        _live.pop(ctypes.addressof(managed.contents), None)
    except BaseException:
        pass


_DELETER_FN = _DELETER(_delete)


def _capsule_destructor(capsule: Optional[int]) -> None:
    # Called when the capsule dies. A consumer that took the tensor renamed the capsule
    # ("used_dltensor") and calls the deleter itself; otherwise nobody took it: delete here.
    try:
        if capsule and _capsule_is_valid(capsule, _CAPSULE_NAME):
            address = _capsule_get(capsule, _CAPSULE_NAME)
            if address:
                _live.pop(address, None)
    except BaseException:
        pass


_CAPSULE_DESTRUCTOR = CFUNCTYPE(None, c_void_p)(_capsule_destructor)


def _dlpack_device(buffer: Any) -> Tuple[int, int]:
    buffer._check()
    backend = buffer._ctx._backend
    if backend is Backend.CUDA:
        return (_KDL_CUDA, buffer._ctx._device)
    if backend is Backend.CPU:
        return (_KDL_CPU, 0)
    raise NotSupportedError(f"DLPack export of {backend.name} memory is not supported")


def _sync_consumer(producer: Any, consumer: Any) -> None:
    """Make the consumer's stream (DLPack's ``stream=``: a CUstream int, 1 legacy default,
    2 per-thread default, -1 no ordering) wait for the work queued on ``producer``."""
    if producer is None or consumer == -1:
        return
    if consumer is None:
        consumer = 1  # DLPack: None means the legacy default stream on CUDA
    from ._stream import Stream

    ctx = producer._ctx
    if producer.native_handle == consumer:
        return  # the same stream: already ordered
    try:
        borrowed = Stream.from_external(ctx, consumer)
    except QdError:
        producer.synchronize()  # cannot import that handle: order by waiting on the host
        return
    try:
        borrowed.wait(producer)  # a qd event recorded on producer, waited for by the consumer
    finally:
        borrowed.close()  # forgets it; the consumer's stream lives on


def _pair_of_ints(value: Any) -> bool:
    return (isinstance(value, tuple) and len(value) == 2 and
            all(type(v) is int or (hasattr(type(v), "__index__") and type(v) is not bool)
                for v in value))


def _dlpack_argument_types(consumer: Any, max_version: Any, dl_device: Any, copy: Any) -> None:
    """``__dlpack__``'s arguments of a wrong Python type: ArgumentTypeError, before their values
    are looked at (the array API: ``stream`` an int or None, ``max_version`` and ``dl_device``
    a pair of ints or None, ``copy`` a bool or None)."""
    if consumer is not None and type(consumer) is not int:
        raise ArgumentTypeError(f"__dlpack__(stream=) takes an int, not {type(consumer).__name__}")
    if max_version is not None and not _pair_of_ints(max_version):
        raise ArgumentTypeError(
            f"__dlpack__(max_version=) takes (major, minor) ints, not {max_version!r}")
    if dl_device is not None and not _pair_of_ints(dl_device):
        raise ArgumentTypeError(
            f"__dlpack__(dl_device=) takes (device_type, device_id) ints, not {dl_device!r}")
    if copy is not None and type(copy) is not bool:
        raise ArgumentTypeError(f"__dlpack__(copy=) takes a bool, not {type(copy).__name__}")


def _dlpack(buffer: Any, address: int, shape: Tuple[int, ...], ts: str, producer: Any,
            consumer: Any, max_version: Any, dl_device: Any, copy: Any) -> Any:
    _dlpack_argument_types(consumer, max_version, dl_device, copy)
    device = _dlpack_device(buffer)
    if copy:
        raise NotSupportedError("__dlpack__(copy=True): qd exports its memory without copying")
    if device[0] != _KDL_CUDA and consumer is not None:
        raise InvalidArgumentError(
            f"__dlpack__(stream={consumer!r}): this buffer is host memory (kDLCPU), which has no "
            "streams; the array API allows only stream=None here")
    if device[0] == _KDL_CUDA:
        if producer is not None and (not producer._h or not producer._ctx._h):
            _native_stream(producer)  # raises the closed-stream error
        _sync_consumer(producer, consumer)
    managed = _DLManagedTensor()
    shape_arr = (c_int64 * max(1, len(shape)))(*shape)
    t = managed.dl_tensor
    t.data = address
    t.device = _DLDevice(*device)
    t.ndim = len(shape)
    t.dtype = _DLDataType(_DL_CODES[ts[1]], itemsize(ts) * 8, 1)
    t.shape = shape_arr
    t.strides = None  # C-contiguous
    t.byte_offset = 0
    managed.deleter = _DELETER_FN
    key = ctypes.addressof(managed)
    _live[key] = (managed, shape_arr, buffer)  # alive until the deleter runs
    try:
        return _capsule_new(key, _CAPSULE_NAME, ctypes.cast(_CAPSULE_DESTRUCTOR, c_void_p))
    except BaseException:
        _live.pop(key, None)
        raise
