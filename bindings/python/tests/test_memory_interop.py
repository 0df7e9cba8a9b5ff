"""DeviceBuffer views and the interop protocols on the CPU backend: what can be checked
without a GPU (test_gpu_memory_interop.py has the CUDA side: torch, CuPy, numba)."""

from __future__ import annotations

import ctypes

import pytest

import qd
from qd import _interop


def test_view_shapes_and_validation(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(64, stream=stream)
    v = buf.view("float32")
    assert v.shape == (16,) and v.dtype == "<f4" and v.nbytes == 64 and int(v) == buf.address
    v = buf.view("<i2", (4, 2), offset=8)
    assert v.shape == (4, 2) and v.address == buf.address + 8 and v.itemsize == 2
    assert buf.view().dtype == "|u1" and buf.view().shape == (64,)
    with pytest.raises(qd.InvalidArgumentError):
        buf.view("float64", 9)  # 72 bytes from a 64-byte buffer
    with pytest.raises(qd.InvalidArgumentError):
        buf.view("int32", offset=2)  # misaligned
    with pytest.raises(qd.ArgumentTypeError):
        buf.view("complex128")
    with pytest.raises(qd.ArgumentTypeError):
        buf.view("int32", stream="s")
    qd.free(buf, stream=stream)


def test_a_view_is_an_address_for_copies_and_kernels(ctx: qd.Context, stream: qd.Stream,
                                                     kernels) -> None:
    buf = qd.alloc(16, stream=stream)
    view = buf.view("uint32", 4)
    qd.memset(view, 0, 16, stream=stream)
    kernels.add_one.launch(view, ctypes.c_uint32(4), grid=1, block=4, stream=stream)
    out = (ctypes.c_uint32 * 4)()
    qd.memcpy(out, view, 16, stream=stream)
    stream.synchronize()
    assert list(out) == [1, 1, 1, 1]
    qd.free(buf, stream=stream)


def test_no_cuda_array_interface_off_cuda(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(16, stream=stream)
    # Absent (AttributeError), so consumers that probe with hasattr fall back.
    assert not hasattr(buf, "__cuda_array_interface__")
    assert not hasattr(buf.view("int32"), "__cuda_array_interface__")
    assert buf.stream is stream
    with pytest.raises(qd.ArgumentTypeError):
        buf.stream = None
    other = qd.Context("cpu")
    try:
        with pytest.raises(qd.WrongContextError):
            buf.stream = other.default_stream
    finally:
        other.close()
    qd.free(buf, stream=stream)


# A DLPack consumer, written with ctypes as a C consumer would: take the capsule's pointer,
# rename the capsule "used_dltensor", and call the deleter when done.
_get = ctypes.pythonapi["PyCapsule_GetPointer"]
_get.restype, _get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_rename = ctypes.pythonapi["PyCapsule_SetName"]
_rename.restype, _rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_USED = b"used_dltensor"


def test_dlpack_capsule_on_cpu(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(96, stream=stream)
    view = buf.view("float32", (4, 6))
    assert view.__dlpack_device__() == (1, 0) and buf.__dlpack_device__() == (1, 0)
    before = len(_interop._live)
    capsule = view.__dlpack__(stream=None)
    assert len(_interop._live) == before + 1
    managed = _interop._DLManagedTensor.from_address(_get(capsule, b"dltensor"))
    t = managed.dl_tensor
    assert t.data == buf.address and (t.device.device_type, t.device.device_id) == (1, 0)
    assert t.ndim == 2 and [t.shape[0], t.shape[1]] == [4, 6] and not t.strides
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (2, 32, 1)  # kDLFloat, 32, 1
    assert _rename(capsule, _USED) == 0  # consumed: the consumer now owns it
    managed.deleter(ctypes.pointer(managed))
    assert len(_interop._live) == before
    del capsule  # a consumed capsule's destructor does nothing more
    assert len(_interop._live) == before
    # A capsule nobody consumes is cleaned up when it dies.
    capsule = buf.__dlpack__()
    assert len(_interop._live) == before + 1
    del capsule
    assert len(_interop._live) == before
    with pytest.raises(qd.NotSupportedError):
        buf.__dlpack__(copy=True)
    qd.free(buf, stream=stream)
    with pytest.raises(qd.InvalidAddressError):
        buf.__dlpack__()  # freed
