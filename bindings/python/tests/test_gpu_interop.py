"""GPU interop: qd with PyTorch, cuda.core and the CUDA stream protocol.

Each test skips, with the reason, when what it needs is missing: a CUDA device and driver (the
qd CUDA backend), PyTorch with CUDA, cuda.core, or a PTX image of the test kernels. The image
is found through $QD_TEST_PTX, else $QD_TEST_CUDA_KERNELS, else
$QD_BUILD_DIR/tests/gpu/*.ptx, else it is compiled from tests/kernels/gpu_kernels.cu with
nvcc -ptx when nvcc is available; it must export qd_test_add_one(u64 int32_t *data, u32 n) and
qd_test_spin(u64 microseconds), the layout of tests/support/test_kernels.h.
"""

from __future__ import annotations

import ctypes
import gc
import glob
import os
import weakref
from pathlib import Path

import pytest

import qd


def _cuda_reason() -> str:
    try:
        n = qd.device_count("cuda")
    except qd.QdError as exc:
        return f"no qd CUDA backend: {exc}"
    return "" if n > 0 else "no CUDA device"


CUDA_REASON = _cuda_reason()
needs_cuda = pytest.mark.skipif(bool(CUDA_REASON), reason=CUDA_REASON or "-")


def _ptx_path() -> str:
    for var in ("QD_TEST_PTX", "QD_TEST_CUDA_KERNELS"):
        if os.environ.get(var):
            return os.environ[var]
    build = os.environ.get("QD_BUILD_DIR")
    if build:
        found = sorted(glob.glob(os.path.join(build, "tests", "gpu", "*.ptx")))
        if found:
            return found[0]
    return ""


def _nvcc_ptx(tmp: Path) -> str:
    import shutil
    import subprocess
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        return ""
    out = tmp / "qd_py_gpu_kernels.ptx"
    src = Path(__file__).resolve().parent / "kernels" / "gpu_kernels.cu"
    done = subprocess.run([nvcc, "-ptx", "-arch=compute_75", str(src), "-o", str(out)],
                          capture_output=True, text=True)
    return str(out) if done.returncode == 0 else ""


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = _ptx_path()
    if not path and not CUDA_REASON:
        path = _nvcc_ptx(tmp_path_factory.mktemp("ptx"))
    if not path:
        pytest.skip("no PTX test image: set QD_TEST_PTX (or build tests/gpu, or put nvcc on "
                    "the PATH)")
    if not Path(path).is_file():
        pytest.skip(f"QD_TEST_PTX={path} does not exist")
    return path


@pytest.fixture
def cuda_ctx():
    if CUDA_REASON:
        pytest.skip(CUDA_REASON)
    with qd.Context("cuda") as ctx:
        yield ctx


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


@pytest.fixture(scope="module")
def cuda_core():
    try:
        import cuda.core as core
        core.Device  # noqa: B018  (1.x: the public namespace)
    except (ImportError, AttributeError):
        core = pytest.importorskip("cuda.core.experimental", reason="cuda.core is not installed")
    return core


def _torch_stream_protocol(torch, stream):
    """A torch stream as an object with __cuda_stream__ (older torch lacks the method)."""
    if hasattr(stream, "__cuda_stream__"):
        return stream

    class _Proto:
        def __init__(self, s) -> None:
            self.s = s

        def __cuda_stream__(self):
            return (0, self.s.cuda_stream)

    return _Proto(stream)


@needs_cuda
def test_cuda_stream_protocol(cuda_ctx: qd.Context) -> None:
    s = cuda_ctx.create_stream()
    version, handle = s.__cuda_stream__()
    assert version == 0 and handle == s.native_handle and handle != 0
    s.close()
    with pytest.raises(qd.ObjectClosedError):
        s.__cuda_stream__()


@needs_cuda
def test_kernel_memory_and_events_on_cuda(cuda_ctx: qd.Context, ptx: str) -> None:
    add_one = cuda_ctx.load_module(ptx).get_kernel("qd_test_add_one")
    n = 4096
    with cuda_ctx.create_stream() as s:
        buf = qd.alloc(4 * n, stream=s)
        qd.memset(buf, 0, stream=s)
        start = cuda_ctx.create_event(timing=True).record(stream=s)
        launcher = add_one.prepare(buf, ctypes.c_uint32(n), grid=n // 256, block=256)
        for _ in range(3):
            launcher(stream=s)
        add_one.launch(buf, ctypes.c_uint32(n), grid=n // 256, block=256, stream=s)
        end = cuda_ctx.create_event(timing=True).record(stream=s)
        out = (ctypes.c_int32 * n)()
        qd.memcpy(out, buf, stream=s)
        qd.free(buf, stream=s)
    assert set(out) == {4}
    assert end - start >= 0.0
    calls = []
    with cuda_ctx.create_stream() as s:
        qd.launch_host_fn(lambda: calls.append(1), stream=s)
    assert calls == [1]


@needs_cuda
def test_torch_op_after_qd_kernel(cuda_ctx: qd.Context, ptx: str, torch) -> None:
    """qd kernel on a qd stream -> qd event -> the torch stream waits -> torch op."""
    module = cuda_ctx.load_module(ptx)
    spin, add_one = module.get_kernel("qd_test_spin"), module.get_kernel("qd_test_add_one")
    n = 1 << 16
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    s = cuda_ctx.create_stream()
    spin.launch(20_000, stream=s)  # delay, so a missing dependency would show
    add_one.launch(x.data_ptr(), ctypes.c_uint32(n), grid=n // 256, block=256, stream=s)
    ready = cuda_ctx.create_event().record(stream=s)
    ts = torch.cuda.Stream()
    borrowed = qd.Stream.from_external(cuda_ctx, _torch_stream_protocol(torch, ts))
    assert borrowed.kind is qd.StreamKind.BORROWED and borrowed.native_handle == ts.cuda_stream
    borrowed.wait(ready)  # the torch stream now waits for the qd kernel
    with torch.cuda.stream(ts):
        y = x * 2
    ts.synchronize()
    assert int((y == 2).sum()) == n
    borrowed.close()  # forgets it; the torch stream lives on
    ts.synchronize()
    s.close()


@needs_cuda
def test_qd_kernel_after_torch_op(cuda_ctx: qd.Context, ptx: str, torch) -> None:
    """torch op on a torch stream -> qd event recorded there -> qd stream waits -> qd kernel."""
    add_one = cuda_ctx.load_module(ptx).get_kernel("qd_test_add_one")
    n = 1 << 16
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        torch.cuda._sleep(50_000_000)  # delay the torch stream
        x.fill_(5)
    borrowed = qd.Stream.from_external(cuda_ctx, _torch_stream_protocol(torch, ts))
    done = cuda_ctx.create_event().record(stream=borrowed)
    s = cuda_ctx.create_stream()
    s.wait(done)
    add_one.launch(x.data_ptr(), ctypes.c_uint32(n), grid=n // 256, block=256, stream=s)
    out = (ctypes.c_int32 * n)()
    qd.memcpy(out, x.data_ptr(), 4 * n, stream=s)
    s.synchronize()
    assert set(out) == {6}
    borrowed.close()
    s.close()


@needs_cuda
def test_borrowed_stream_keeps_its_owner_alive(cuda_ctx: qd.Context, torch) -> None:
    ts = torch.cuda.Stream()
    proto = _torch_stream_protocol(torch, ts)
    ref = weakref.ref(proto) if proto is not ts else None
    borrowed = qd.Stream.from_external(cuda_ctx, proto)
    del proto
    gc.collect()
    if ref is not None:
        assert ref() is not None
    borrowed.synchronize()
    borrowed.close()
    ts.synchronize()  # never destroyed by qd


@needs_cuda
def test_cuda_core_stream_from_qd_stream(cuda_ctx: qd.Context, cuda_core, ptx: str) -> None:
    dev = cuda_core.Device(0)
    dev.set_current()
    s = cuda_ctx.create_stream()
    try:
        cs = cuda_core.Stream(s)  # cuda.core >= 1.2: explicit conversion via __cuda_stream__
    except Exception:
        cs = dev.create_stream(s)  # older cuda.core
    assert int(cs.handle) == s.native_handle
    # A cuda.core launch on the qd stream (through its cuda.core view), ordered with qd work.
    code = cuda_core.ObjectCode.from_ptx(Path(ptx).read_bytes())
    kernel = code.get_kernel("qd_test_add_one")
    n = 1024
    buf = qd.alloc(4 * n, stream=s)
    qd.memset(buf, 0, stream=s)
    cuda_core.launch(cs, cuda_core.LaunchConfig(grid=n // 256, block=256), kernel,
                     ctypes.c_uint64(buf.address), ctypes.c_uint32(n))
    out = (ctypes.c_int32 * n)()
    qd.memcpy(out, buf, stream=s)
    qd.free(buf, stream=s)
    s.synchronize()
    assert set(out) == {1}
    cs.close()
    s.close()


@needs_cuda
def test_import_cuda_core_stream(cuda_ctx: qd.Context, cuda_core) -> None:
    dev = cuda_core.Device(0)
    dev.set_current()
    cs = dev.create_stream()
    borrowed = qd.Stream.from_external(cuda_ctx, cs)
    assert borrowed.native_handle == int(cs.handle)
    ev = cuda_ctx.create_event().record(stream=borrowed)
    ev.synchronize()
    borrowed.close()
    cs.sync()


@needs_cuda
def test_torch_stream_passed_directly_as_stream(cuda_ctx: qd.Context, ptx: str, torch) -> None:
    """stream=<a torch stream> (any __cuda_stream__ object) on a CUDA context: imported once
    per native stream, behind the scenes, as cuda.core's launch() accepts it."""
    add_one = cuda_ctx.load_module(ptx).get_kernel("qd_test_add_one")
    n = 1 << 12
    ts = _torch_stream_protocol(torch, torch.cuda.Stream())
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    live = cuda_ctx.stats().live_streams
    for _ in range(3):
        add_one.launch(x.data_ptr(), ctypes.c_uint32(n), grid=n // 256, block=256, stream=ts)
    assert cuda_ctx.stats().live_streams == live + 1  # one borrowed stream, cached
    done = cuda_ctx.create_event().record(stream=ts)
    done.synchronize()
    assert int((x == 3).sum()) == n
    buf = qd.alloc(4 * n, stream=cuda_ctx.default_stream)
    cuda_ctx.default_stream.synchronize()
    qd.memcpy(buf, x.data_ptr(), 4 * n, stream=ts)  # the buffer names the context
    out = (ctypes.c_int32 * n)()
    qd.memcpy(out, buf, stream=ts)
    qd.free(buf, stream=ts)
    done = cuda_ctx.create_event().record(stream=ts)
    done.synchronize()
    assert set(out) == {3}
    with pytest.raises(qd.HandleTypeError, match="from_external"):
        qd.alloc(16, stream=ts)  # nothing names a context
