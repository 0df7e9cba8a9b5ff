"""Stream-ordered memory, host memory, and Python buffers as copy sources and targets."""

from __future__ import annotations

import array
import ctypes
import gc
import threading
import weakref

import pytest

import qd


def test_alloc_memset_memcpy_roundtrip(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(64, stream=stream)
    assert isinstance(buf, qd.DeviceBuffer) and buf.size == 64 and len(buf) == 64
    assert int(buf) == buf.address != 0
    stats = ctx.stats()
    assert stats.live_allocations == 1 and stats.bytes_allocated == 64
    qd.memset(buf, 0x5A, stream=stream)
    out = bytearray(64)
    qd.memcpy(out, buf, stream=stream)
    stream.synchronize()
    assert out == b"\x5a" * 64
    src = bytes(range(64))
    qd.memcpy(buf, src, stream=stream)
    view = memoryview(bytearray(32))
    qd.memcpy(view, buf, 32, stream=stream)  # a memoryview target, explicit size
    arr = array.array("I", [0] * 16)
    qd.memcpy(arr, buf, stream=stream)  # array.array target, sized 64 bytes
    stream.synchronize()
    assert bytes(view) == src[:32] and arr.tobytes() == src
    buf.free(stream=stream)
    assert buf.freed
    stream.synchronize()
    assert ctx.stats().live_allocations == 0


def test_memcpy_between_int_addresses(ctx: qd.Context, stream: qd.Stream) -> None:
    a = qd.alloc(16, stream=stream)
    b = qd.alloc(16, stream=stream)
    qd.memset(a.address, 3, 16, stream=stream)
    qd.memcpy(b.address, a.address, 16, stream=stream)
    out = bytearray(16)
    qd.memcpy(out, b, stream=stream)
    stream.synchronize()
    assert out == b"\x03" * 16
    with pytest.raises(qd.ArgumentTypeError):
        qd.memcpy(b.address, a.address, stream=stream)  # no size known anywhere
    qd.free(a, stream=stream)
    qd.free(b.address, stream=stream)


def test_memcpy_size_rules(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(16, stream=stream)
    with pytest.raises(qd.InvalidArgumentError, match="different sizes"):
        qd.memcpy(bytearray(8), buf, stream=stream)
    with pytest.raises(qd.InvalidAddressError):
        qd.memcpy(bytearray(8), buf, 16, stream=stream)  # runs past the Python buffer
    with pytest.raises(qd.InvalidAddressError) as info:
        qd.memcpy(bytearray(32), buf, 32, stream=stream)  # runs past the allocation: C says so
    assert info.value.status == qd.Status.ERROR_INVALID_ADDRESS
    qd.memcpy(bytearray(8), buf, 0, stream=stream)  # 0 bytes: a no-op
    qd.free(buf, stream=stream)


def test_copy_target_must_be_writable_and_contiguous(ctx: qd.Context,
                                                     stream: qd.Stream) -> None:
    buf = qd.alloc(8, stream=stream)
    for target in (b"\0" * 8, memoryview(bytearray(8)).toreadonly()):
        with pytest.raises(qd.ArgumentTypeError, match="writable"):
            qd.memcpy(target, buf, stream=stream)
        with pytest.raises(TypeError):
            qd.memset(target, 0, stream=stream)
    strided = memoryview(bytearray(16))[::2]
    with pytest.raises(qd.ArgumentTypeError, match="contiguous"):
        qd.memcpy(strided, buf, stream=stream)
    for bad in (None, 1.5, "text", object()):
        with pytest.raises(qd.ArgumentTypeError):
            qd.memcpy(bad, buf, 8, stream=stream)
        with pytest.raises(qd.ArgumentTypeError):
            qd.memcpy(bytearray(8), bad, 8, stream=stream)
    qd.free(buf, stream=stream)


class _TrackedBuffer(bytearray):
    """A bytearray that can be weakly referenced (to watch its lifetime)."""


def test_python_buffer_stays_alive_until_the_copy_ran(ctx: qd.Context,
                                                       stream: qd.Stream) -> None:
    gate = threading.Event()
    src = qd.alloc(1024, stream=stream)
    qd.launch_host_fn(lambda: gate.wait(5), stream=stream)
    target = _TrackedBuffer(1024)
    ref = weakref.ref(target)
    qd.memcpy(target, src, stream=stream)
    del target
    gc.collect()
    assert ref() is not None  # the binding keeps it alive while the copy is queued
    gate.set()
    stream.synchronize()
    gc.collect()
    assert ref() is None  # ...and lets it go once the copy has run
    qd.free(src, stream=stream)


def test_python_buffer_is_locked_until_the_copy_ran(ctx: qd.Context,
                                                     stream: qd.Stream) -> None:
    gate = threading.Event()
    src = qd.alloc(1024, stream=stream)
    qd.memset(src, 9, stream=stream)
    qd.launch_host_fn(lambda: gate.wait(5), stream=stream)
    target = bytearray(1024)
    qd.memcpy(target, src, stream=stream)
    with pytest.raises(BufferError):
        target.extend(b"x")  # exported until the copy has run: cannot be resized
    gate.set()
    stream.synchronize()
    assert target == b"\x09" * 1024
    target.extend(b"x")  # released: resizable again
    qd.free(src, stream=stream)


def test_failed_copy_releases_the_python_buffer(ctx: qd.Context, stream: qd.Stream) -> None:
    target = bytearray(8)
    with pytest.raises(qd.InvalidArgumentError):
        qd.memcpy(target, 0, 8, stream=stream)  # src 0 with bytes > 0: C refuses
    target.extend(b"x")  # not left exported


def test_free_errors(ctx: qd.Context, stream: qd.Stream) -> None:
    buf = qd.alloc(8, stream=stream)
    qd.free(buf, stream=stream)
    with pytest.raises(qd.InvalidAddressError):
        qd.free(buf, stream=stream)  # binding: this DeviceBuffer was freed
    with pytest.raises(qd.InvalidAddressError) as info:
        qd.free(buf.address, stream=stream)  # C: not a live allocation
    assert info.value.status == qd.Status.ERROR_INVALID_ADDRESS
    with pytest.raises(qd.InvalidAddressError):
        qd.memset(buf, 0, stream=stream)  # never write through a freed buffer
    with qd.Context("cpu") as other:
        s2 = other.create_stream()
        foreign = qd.alloc(8, stream=s2)
        with pytest.raises(qd.InvalidAddressError):
            qd.free(foreign.address, stream=stream)  # another context's allocation
        s2.close()


def test_buffers_of_a_closed_context_are_refused(stream: qd.Stream) -> None:
    ctx = qd.Context("cpu")
    s = ctx.create_stream()
    buf = qd.alloc(8, stream=s)
    host = ctx.host_alloc(8)
    ctx.close()
    with pytest.raises(qd.InvalidAddressError):
        qd.memcpy(bytearray(8), buf, stream=stream)
    with pytest.raises(qd.InvalidAddressError):
        host.view
    host.close()  # already freed by the context: a no-op


def test_host_alloc(ctx: qd.Context, stream: qd.Stream) -> None:
    with ctx.host_alloc(32) as host:
        assert ctx.stats().host_bytes_allocated == 32
        view = host.view
        view[:] = bytes(range(32))
        dev = qd.alloc(32, stream=stream)
        qd.memcpy(dev, host, stream=stream)
        out = bytearray(32)
        qd.memcpy(out, dev, stream=stream)
        stream.synchronize()
        assert out == bytes(range(32))
        qd.free(dev, stream=stream)
        del view
    assert host.closed and ctx.stats().host_bytes_allocated == 0
    with pytest.raises(qd.InvalidArgumentError):
        ctx.host_alloc(0)
    with pytest.raises(qd.QdOverflowError):
        ctx.host_alloc(2**64 - 1)


def test_device_buffer_of_another_context_is_wrong_context(ctx: qd.Context, stream: qd.Stream,
                                                           kernels) -> None:
    with qd.Context("cpu") as other:
        theirs = qd.alloc(16, stream=other.default_stream)
        mine = qd.alloc(16, stream=stream)
        out = bytearray(16)
        with pytest.raises(qd.WrongContextError, match="belongs to"):
            qd.memcpy(mine, theirs, stream=stream)
        with pytest.raises(qd.WrongContextError):
            qd.memcpy(out, theirs, stream=stream)
        with pytest.raises(qd.WrongContextError):
            qd.memset(theirs, 1, stream=stream)
        for launch in (lambda: kernels.add_one.launch(theirs, ctypes.c_uint32(4), stream=stream),
                       lambda: kernels.add_one.prepare(theirs, ctypes.c_uint32(4)),
                       lambda: qd.Task(kernels.add_one, theirs, ctypes.c_uint32(4))):
            with pytest.raises(qd.WrongContextError):
                launch()
        stream.synchronize()
        qd.memset(mine, 0, stream=stream)  # its own buffers still work
        kernels.add_one.launch(mine, ctypes.c_uint32(4), stream=stream)
        qd.memcpy(out, mine, stream=stream)
        stream.synchronize()
        assert out[:4] == (1).to_bytes(4, "little")
        qd.free(theirs, stream=other.default_stream)
