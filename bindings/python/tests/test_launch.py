"""Modules, kernels, launches (plain, pre-packed, parallel) and Python host kernels."""

from __future__ import annotations

import array
import ctypes
import struct
import threading
import time

import pytest

import qd


def _int32s(n: int):
    return (ctypes.c_int32 * n)()


def test_load_module_errors(ctx: qd.Context, cpu_module_path: str, tmp_path) -> None:
    with pytest.raises(qd.InvalidArgumentError):
        ctx.load_module("qd_py_test_kernels.so")  # no '/': never searched for
    with pytest.raises(qd.NotFoundError) as info:
        ctx.load_module(str(tmp_path / "missing.so"))
    assert info.value.status == qd.Status.ERROR_NOT_FOUND
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an ELF file")
    with pytest.raises(qd.InvalidImageError):
        ctx.load_module(str(junk))
    with pytest.raises(qd.ArgumentTypeError):
        ctx.load_module(12)
    module = ctx.load_module(cpu_module_path)
    with pytest.raises(qd.NotFoundError):
        module.get_kernel("no_such_kernel")
    with pytest.raises(qd.ArgumentTypeError):
        module.get_kernel(None)
    module.close()


def test_module_and_kernel_lifetime(ctx: qd.Context, cpu_module_path: str,
                                    stream: qd.Stream) -> None:
    import pathlib
    module = ctx.load_module(pathlib.Path(cpu_module_path))  # PathLike works
    k = module.get_kernel("noop")
    assert k.name == "noop" and ctx.stats().live_kernels >= 1
    launcher = k.prepare()
    module.close()
    assert module.closed and k.closed
    with pytest.raises(qd.ObjectClosedError):
        k.launch(stream=stream)
    with pytest.raises(qd.ObjectClosedError):
        launcher(stream=stream)
    with pytest.raises(qd.ObjectClosedError):
        module.get_kernel("noop")


def test_launch_grid_block_and_args(kernels, stream: qd.Stream) -> None:
    n = 1000
    data = _int32s(n)
    kernels.add_one.launch(ctypes.addressof(data), ctypes.c_uint32(n), grid=4, block=256,
                           stream=stream)
    kernels.add_one.launch(ctypes.addressof(data), ctypes.c_uint32(n), grid=(2, 2),
                           block=[16, 16], stream=stream)
    stream.synchronize()
    assert list(data) == [2] * n


class Blob(ctypes.Structure):
    _fields_ = [("a", ctypes.c_uint64), ("b", ctypes.c_double)]


def test_argument_mapping_bytes_exactly(kernels, stream: qd.Stream) -> None:
    out = (ctypes.c_uint8 * 64)()
    kernels.echo8.launch(ctypes.addressof(out), ctypes.c_uint8(0xAB), ctypes.c_uint16(0xBEEF),
                         ctypes.c_uint32(0xDEADBEEF), 2**64 - 1, ctypes.c_float(1.5), 2.25,
                         Blob(7, -0.5), stream=stream)
    stream.synchronize()
    expected = struct.pack("<BHIQfd", 0xAB, 0xBEEF, 0xDEADBEEF, 2**64 - 1, 1.5, 2.25) + \
        struct.pack("<Qd", 7, -0.5)
    assert bytes(out[:len(expected)]) == expected


def test_prepared_launcher_reuses_and_mutates_args(kernels, stream: qd.Stream) -> None:
    n = 64
    data = _int32s(n)
    launcher = kernels.add_one.prepare(ctypes.addressof(data), ctypes.c_uint32(n), grid=1,
                                       block=n)
    assert launcher.kernel is kernels.add_one and len(launcher.args) == 2
    for _ in range(10):
        launcher(stream=stream)
    launcher.args[1].value = 10  # in place: only the first 10 elements from now on
    launcher.launch(stream=stream)
    stream.synchronize()
    assert list(data) == [11] * 10 + [10] * (n - 10)


def test_arguments_are_copied_at_launch(kernels, ctx: qd.Context) -> None:
    """docs/reliability.md, category 9: caller storage overwritten right after each launch."""
    k = 8
    streams = [ctx.create_stream() for _ in range(k)]
    dst = (ctypes.c_uint32 * k)()
    value = ctypes.c_uint32(0)
    for i, s in enumerate(streams):
        value.value = 100 + i
        kernels.spin_write.launch(ctypes.addressof(dst) + 4 * i, value, 5_000, stream=s)
        value.value = 0xFFFFFFFF  # overwritten at once
    ctx.synchronize()
    assert list(dst) == [100 + i for i in range(k)]
    for s in streams:
        s.close()


def test_launch_limits_are_the_c_api_statuses(kernels, stream: qd.Stream) -> None:
    with pytest.raises(qd.InvalidArgumentError) as info:
        kernels.noop.launch(*([0] * 65), stream=stream)  # more than QD_MAX_ARGS
    assert info.value.status == qd.Status.ERROR_INVALID_ARGUMENT
    big = (ctypes.c_uint8 * 4097)()
    with pytest.raises(qd.QdOverflowError) as info:
        kernels.noop.launch(big, stream=stream)  # more than QD_MAX_ARG_BYTES
    assert info.value.status == qd.Status.ERROR_OVERFLOW
    with pytest.raises(qd.InvalidArgumentError):
        kernels.noop.launch(grid=0, stream=stream)
    with pytest.raises(qd.InvalidArgumentError):
        kernels.noop.launch(block=(1, 1, 1, 1), stream=stream)
    with pytest.raises(qd.QdOverflowError):
        kernels.noop.launch(grid=(65536, 65536, 2), stream=stream)
    with pytest.raises(qd.ArgumentRangeError):
        kernels.noop.launch(grid=-1, stream=stream)
    with pytest.raises(qd.ArgumentTypeError):
        kernels.noop.launch(grid=1.0, stream=stream)
    kernels.noop.launch(grid=1, stream=stream)  # a cached config does not hide 1.0 above
    with pytest.raises(qd.ArgumentTypeError):
        kernels.noop.launch(grid=1.0, stream=stream)


@pytest.mark.parametrize("bad", [True, None, "x", b"x", bytearray(2), -1, 2**64, object()])
def test_unsupported_kernel_arguments(kernels, stream: qd.Stream, bad) -> None:
    with pytest.raises(qd.InvalidArgumentError):  # ArgumentTypeError or ArgumentRangeError
        kernels.noop.launch(bad, stream=stream)
    with pytest.raises(qd.InvalidArgumentError):
        kernels.noop.prepare(bad)


def test_kernel_args_accept_index_objects_and_buffers(kernels, ctx: qd.Context,
                                                      stream: qd.Stream) -> None:
    class Index:
        def __index__(self) -> int:
            return 5

    dev = qd.alloc(16, stream=stream)
    with ctx.host_alloc(16) as host:
        kernels.noop.launch(Index(), dev, host, stream=stream)
        stream.synchronize()
    qd.free(dev, stream=stream)
    with pytest.raises(qd.InvalidAddressError):
        kernels.noop.launch(dev, stream=stream)  # a freed buffer is refused


def test_launch_parallel_groups_are_ordered_and_stream_waits(kernels, ctx: qd.Context) -> None:
    s = ctx.create_stream()
    groups, per_group = 4, 5
    logs = [(ctypes.c_uint32 * (per_group + 1))() for _ in range(groups)]
    gate_flag = ctypes.c_uint32(0)
    kernels.spin_write.launch(ctypes.addressof(gate_flag), ctypes.c_uint32(1), 30_000, stream=s)
    tasks = []
    for g in range(groups):
        for i in range(per_group):
            if i % 2:
                tasks.append(qd.Task(kernels.append_log, ctypes.addressof(logs[g]),
                                     ctypes.c_uint32(i), group=g))
            else:
                tasks.append((g, kernels.append_log, 1, 1,
                              (ctypes.addressof(logs[g]), ctypes.c_uint32(i))))
    qd.launch_parallel(tasks, stream=s)
    snapshot = []
    qd.launch_host_fn(lambda: snapshot.append([list(log) for log in logs]), stream=s)
    s.synchronize()
    assert snapshot == [[[per_group] + list(range(per_group))] * groups]
    assert gate_flag.value == 1
    qd.launch_parallel([], stream=s)  # no-op
    assert ctx.stats().stream_pool_leased == 0
    s.close()


def test_launch_parallel_validation(kernels, ctx_small_pool, stream_of_small) -> None:
    with pytest.raises(qd.ArgumentTypeError):
        qd.launch_parallel([object()], stream=stream_of_small)
    with pytest.raises(qd.HandleTypeError):
        qd.launch_parallel([qd.Task(kernels.noop)], stream=None)
    with pytest.raises(qd.HandleTypeError):
        qd.Task("noop")


@pytest.fixture
def ctx_small_pool():
    with qd.Context("cpu", stream_pool_size=1) as c:
        yield c


@pytest.fixture
def stream_of_small(ctx_small_pool):
    s = ctx_small_pool.create_stream()
    yield s
    s.close()


def test_launch_parallel_pool_exhausted_queues_nothing(ctx_small_pool, stream_of_small,
                                                       cpu_module_path) -> None:
    ctx = ctx_small_pool
    k = ctx.load_module(cpu_module_path).get_kernel("append_log")
    log = (ctypes.c_uint32 * 4)()
    held = ctx.acquire_stream()
    with pytest.raises(qd.PoolExhaustedError):
        qd.launch_parallel([qd.Task(k, ctypes.addressof(log), ctypes.c_uint32(1))],
                           stream=stream_of_small)
    held.close()
    stream_of_small.synchronize()
    assert log[0] == 0


def test_python_host_kernel(ctx: qd.Context, stream: qd.Stream) -> None:
    seen = []
    lock = threading.Lock()

    def kernel(info: qd.HostKernelInfo, args) -> None:
        base = qd.kernel_arg(args, 0)
        scale = qd.kernel_arg(args, 1, ctypes.c_float)
        with lock:
            seen.append((tuple(info.block_idx), tuple(info.grid_dim), tuple(info.block_dim)))
        first = info.block_idx[0] * info.block_dim[0]
        for t in range(info.block_dim[0]):
            cell = ctypes.c_float.from_address(base + 4 * (first + t))
            cell.value *= scale

    k = qd.Kernel.from_host_fn(ctx, kernel)
    assert k.name == "kernel"
    data = (ctypes.c_float * 8)(*range(8))
    k.launch(ctypes.addressof(data), ctypes.c_float(2.0), grid=2, block=4, stream=stream)
    stream.synchronize()
    assert list(data) == [2.0 * i for i in range(8)]
    assert sorted(seen) == [((0, 0, 0), (2, 1, 1), (4, 1, 1)), ((1, 0, 0), (2, 1, 1), (4, 1, 1))]


def test_ctypes_host_kernel(ctx: qd.Context, stream: qd.Stream) -> None:
    hits = []

    @qd.HostKernelFn
    def kernel(info, args):
        hits.append(info.contents.block_idx[0])
        return 0

    k = qd.Kernel.from_host_fn(ctx, kernel, name="raw")
    k.launch(grid=3, stream=stream)
    stream.synchronize()
    assert sorted(hits) == [0, 1, 2] and k.name == "raw"
    with pytest.raises(qd.ArgumentTypeError):
        qd.Kernel.from_host_fn(ctx, 42)


def test_host_kernel_exception_loses_the_context(stream: qd.Stream, ctx: qd.Context) -> None:
    def bad(info, args):
        raise RuntimeError("kernel bug")

    k = qd.Kernel.from_host_fn(ctx, bad, name="bad")
    k.launch(stream=stream)
    with pytest.raises(qd.DeviceLostError) as info:
        stream.synchronize()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "bad" in info.value.message  # the library names the faulting kernel
    with pytest.raises(qd.DeviceLostError):
        ctx.create_stream()
    # Cleanup still works on a lost context.
    stream.close()
    k.close()


def test_fault_kernel_from_module_loses_the_context(kernels, ctx: qd.Context,
                                                    stream: qd.Stream) -> None:
    kernels.fault.launch(stream=stream)
    with pytest.raises(qd.DeviceLostError) as info:
        ctx.synchronize()
    assert "fault" in info.value.message
    for call in (lambda: kernels.noop.launch(stream=stream), ctx.acquire_stream,
                 lambda: qd.alloc(8, stream=stream), ctx.create_event):
        with pytest.raises(qd.DeviceLostError):
            call()
