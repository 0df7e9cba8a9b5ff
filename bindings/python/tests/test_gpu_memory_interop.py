"""Zero-copy memory interop on CUDA: ``__cuda_array_interface__`` (v3, with its ``stream``) and
DLPack from qd device memory into PyTorch, CuPy and numba-cuda; foreign streams imported in
the forms users hold them (raw int, ``.cuda_stream``, ``.ptr``).

Every test skips, with the reason, without a CUDA device, the package it uses, or the PTX test
image (see test_gpu_interop.py). Ordering tests delay qd's stream with a spin kernel before the
write, so a consumer that did not wait for qd's work would read stale data; no test measures
time.
"""

from __future__ import annotations

import ctypes

import pytest

import qd
from test_gpu_interop import CUDA_REASON, cuda_ctx, needs_cuda, ptx, torch  # noqa: F401

N = 1 << 16
SPIN_US = 20_000  # qd_test_spin: keeps the qd stream busy, so a missing wait would show


@pytest.fixture(scope="module")
def cupy():
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no CUDA device")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"CuPy cannot use CUDA: {exc}")
    return cp


@pytest.fixture(scope="module")
def numba_cuda():
    cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    if not cuda.is_available():
        pytest.skip("numba.cuda sees no CUDA device")
    return cuda


def _filled(ctx: qd.Context, ptx_path: str, value: int, delay: bool = True):
    """A qd stream, and an int32[N] buffer on it set to ``value`` after a spin kernel (all
    queued, nothing waited for)."""
    module = ctx.load_module(ptx_path)
    spin, add_one = module.get_kernel("qd_test_spin"), module.get_kernel("qd_test_add_one")
    s = ctx.create_stream(non_blocking=True)
    buf = qd.alloc(4 * N, stream=s)
    qd.memset(buf, 0, stream=s)
    if delay:
        spin.launch(SPIN_US, stream=s)
    for _ in range(value):
        add_one.launch(buf, ctypes.c_uint32(N), grid=N // 256, block=256, stream=s)
    return s, buf


@needs_cuda
def test_cuda_array_interface_v3(cuda_ctx: qd.Context) -> None:
    s = cuda_ctx.create_stream(non_blocking=True)
    buf = qd.alloc(4 * N, stream=s)
    cai = buf.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4 * N,) and cai["typestr"] == "|u1"
    assert cai["data"] == (buf.address, False) and cai["strides"] is None
    assert cai["stream"] == s.native_handle != 0
    view = buf.view("float32", (N // 4, 4), stream=cuda_ctx.default_stream)
    cai = view.__cuda_array_interface__
    assert cai["shape"] == (N // 4, 4) and cai["typestr"] == "<f4"
    assert cai["stream"] == (cuda_ctx.default_stream.native_handle or 1)  # never 0 (v3)
    s2 = cuda_ctx.create_stream()
    buf.stream = s2
    assert buf.__cuda_array_interface__["stream"] == s2.native_handle
    s2.close()
    with pytest.raises(qd.ObjectClosedError):
        buf.__cuda_array_interface__  # ordered on a closed stream: say so, never guess
    buf.stream = s
    qd.free(buf, stream=s)
    s.synchronize()
    with pytest.raises(qd.InvalidAddressError):
        buf.__cuda_array_interface__  # freed
    s.close()


@needs_cuda
def test_torch_as_tensor_is_zero_copy(cuda_ctx: qd.Context, ptx: str, torch) -> None:
    s, buf = _filled(cuda_ctx, ptx, 3, delay=False)
    s.synchronize()
    t = torch.as_tensor(buf.view("int32"), device="cuda")
    assert t.data_ptr() == buf.address and t.dtype == torch.int32 and t.shape == (N,)
    assert int((t == 3).sum()) == N
    t.fill_(7)  # written through torch, read back through qd: the same memory
    torch.cuda.synchronize()
    out = (ctypes.c_int32 * N)()
    qd.memcpy(out, buf, stream=s)
    s.synchronize()
    assert set(out) == {7}
    qd.free(buf, stream=s)
    s.close()


@needs_cuda
def test_torch_from_dlpack_orders_after_qd_work(cuda_ctx: qd.Context, ptx: str, torch) -> None:
    s, buf = _filled(cuda_ctx, ptx, 2)  # still spinning: nothing waited for on the host
    view = buf.view("int32", (N // 256, 256))
    assert view.__dlpack_device__() == (2, cuda_ctx.device)
    t = torch.from_dlpack(view)  # torch passes its current stream; qd makes it wait
    assert t.data_ptr() == buf.address and tuple(t.shape) == (N // 256, 256)
    assert int((t == 2).sum()) == N  # computed on torch's stream, after qd's kernels
    del t
    s.synchronize()
    qd.free(buf, stream=s)
    s.close()


@needs_cuda
def test_cupy_asarray_is_zero_copy_and_ordered(cuda_ctx: qd.Context, ptx: str, cupy) -> None:
    s, buf = _filled(cuda_ctx, ptx, 4)  # CuPy synchronizes on the interface's stream
    a = cupy.asarray(buf.view("int32"))
    assert a.data.ptr == buf.address and a.dtype == cupy.int32 and a.shape == (N,)
    assert int((a == 4).sum()) == N
    a[:] = 9
    cupy.cuda.runtime.deviceSynchronize()
    out = (ctypes.c_int32 * N)()
    qd.memcpy(out, buf, stream=s)
    s.synchronize()
    assert set(out) == {9}
    qd.free(buf, stream=s)
    s.close()


@needs_cuda
def test_numba_as_cuda_array_is_zero_copy_and_ordered(cuda_ctx: qd.Context, ptx: str,
                                                      numba_cuda) -> None:
    s, buf = _filled(cuda_ctx, ptx, 5)  # numba synchronizes on the interface's stream
    d = numba_cuda.as_cuda_array(buf.view("int32"))
    assert d.__cuda_array_interface__["data"][0] == buf.address and d.shape == (N,)
    host = d.copy_to_host()
    assert int((host == 5).sum()) == N
    s.synchronize()
    qd.free(buf, stream=s)
    s.close()


# ----------------------------------------------------------------------------------------------
# Stream.from_external, in the forms users hold foreign streams
# ----------------------------------------------------------------------------------------------


class _OldTorchStream:
    def __init__(self, s) -> None:
        self.cuda_stream = s.cuda_stream
        self.s = s


class _OldCupyStream:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


@needs_cuda
def test_from_external_raw_int_cuda_stream_and_ptr(cuda_ctx: qd.Context, ptx: str,
                                                   torch) -> None:
    ts = torch.cuda.Stream()
    for obj in (ts.cuda_stream, _OldTorchStream(ts), _OldCupyStream(ts.cuda_stream)):
        borrowed = qd.Stream.from_external(cuda_ctx, obj)
        assert borrowed.kind is qd.StreamKind.BORROWED
        assert borrowed.native_handle == ts.cuda_stream
        s, buf = _filled(cuda_ctx, ptx, 1)
        borrowed.wait(s)  # the torch stream waits for qd's kernels
        with torch.cuda.stream(ts):
            t = torch.as_tensor(buf.view("int32"), device="cuda")
            total = int((t == 1).sum())
        assert total == N
        ts.synchronize()
        borrowed.close()  # forgets it; the torch stream lives on
        qd.free(buf, stream=s)
        s.close()
    ts.synchronize()


@needs_cuda
def test_from_external_cupy_stream(cuda_ctx: qd.Context, cupy) -> None:
    cs = cupy.cuda.Stream(non_blocking=True)
    for obj in (cs, _OldCupyStream(cs.ptr), cs.ptr):
        borrowed = qd.Stream.from_external(cuda_ctx, obj)
        assert borrowed.native_handle == cs.ptr
        borrowed.synchronize()
        borrowed.close()
