"""The GPU tests that apply to HIP, with ``qd.Context("hip")``.

They run where the HIP backend has a device: on AMD hardware, or on an NVIDIA GPU through the
test HIP runtime of tests/hip_runtime (on LD_LIBRARY_PATH; tools/gpu-check's hip step). The
kernel image is $QD_TEST_HIP_KERNELS (a code object, or through the test runtime the CUDA cubin
of tests/gpu); without a HIP device or an image each test is skipped with the reason.
"""

from __future__ import annotations

import ctypes
import os

import pytest

import qd


def _hip_reason() -> str:
    try:
        n = qd.device_count("hip")
    except qd.QdError as exc:
        return f"no qd HIP backend: {exc}"
    return "" if n > 0 else "no HIP device"


HIP_REASON = _hip_reason()
needs_hip = pytest.mark.skipif(bool(HIP_REASON), reason=HIP_REASON or "-")


@pytest.fixture
def hip_ctx():
    with qd.Context("hip") as ctx:
        yield ctx


@pytest.fixture(scope="module")
def hip_image() -> bytes:
    path = os.environ.get("QD_TEST_HIP_KERNELS", "")
    if not path:
        pytest.skip("no HIP test image: set QD_TEST_HIP_KERNELS")
    with open(path, "rb") as f:
        return f.read()


@needs_hip
def test_hip_context_reports_its_device(hip_ctx: qd.Context) -> None:
    props = qd.device_properties("hip", 0)
    assert props.backend == qd.Backend.HIP
    assert props.multiprocessors > 0 and props.name
    with hip_ctx.create_stream() as s:
        assert s.native_handle != 0


@needs_hip
def test_kernel_memory_events_and_host_fn_on_hip(hip_ctx: qd.Context, hip_image: bytes) -> None:
    add_one = hip_ctx.load_module(hip_image).get_kernel("qd_test_add_one")
    n = 4096
    with hip_ctx.create_stream() as s:
        buf = qd.alloc(4 * n, stream=s)
        qd.memset(buf, 0, stream=s)
        start = hip_ctx.create_event(timing=True).record(stream=s)
        launcher = add_one.prepare(buf, ctypes.c_uint32(n), grid=n // 256, block=256)
        for _ in range(3):
            launcher(stream=s)
        add_one.launch(buf, ctypes.c_uint32(n), grid=n // 256, block=256, stream=s)
        end = hip_ctx.create_event(timing=True).record(stream=s)
        out = (ctypes.c_int32 * n)()
        qd.memcpy(out, buf, stream=s)
        qd.free(buf, stream=s)
    assert set(out) == {4}
    assert end - start >= 0.0
    calls = []
    with hip_ctx.create_stream() as s:
        qd.launch_host_fn(lambda: calls.append(1), stream=s)
    assert calls == [1]


@needs_hip
def test_fork_join_orders_hip_kernels(hip_ctx: qd.Context, hip_image: bytes) -> None:
    add_one = hip_ctx.load_module(hip_image).get_kernel("qd_test_add_one")
    n = 1024
    with hip_ctx.create_stream() as parent:
        bufs = [qd.alloc(4 * n, stream=parent) for _ in range(4)]
        for b in bufs:
            qd.memset(b, 0, stream=parent)
        children = parent.fork(4)
        for child, b in zip(children, bufs):
            add_one.launch(b, ctypes.c_uint32(n), grid=n // 256, block=256, stream=child)
        parent.join(children)
        outs = []
        for b in bufs:
            out = (ctypes.c_int32 * n)()
            qd.memcpy(out, b, stream=parent)
            outs.append(out)
            qd.free(b, stream=parent)
    assert all(set(o) == {1} for o in outs)
