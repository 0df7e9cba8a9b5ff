"""Streams: owned, leased (pool), forked, default, borrowed; ordering; the active stream."""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import weakref

import pytest

import qd


def _sleep_then(ms: float, fn=lambda: None):
    def run() -> None:
        time.sleep(ms / 1000.0)
        fn()
    return run


def test_stream_constructor_is_not_public() -> None:
    with pytest.raises(TypeError):
        qd.Stream()


def test_with_owned_stream_synchronizes_then_destroys(ctx: qd.Context) -> None:
    done = []
    before = ctx.stats().live_streams
    with ctx.create_stream() as s:
        assert s.kind is qd.StreamKind.OWNED
        assert ctx.stats().live_streams == before + 1
        qd.launch_host_fn(_sleep_then(50, lambda: done.append(1)), stream=s)
    assert done == [1]  # synchronized before the destroy
    assert s.closed and ctx.stats().live_streams == before
    with pytest.raises(qd.ObjectClosedError):
        s.synchronize()
    with pytest.raises(qd.ObjectClosedError):
        with s:
            pass


def test_with_block_raising_closes_without_synchronizing(ctx: qd.Context) -> None:
    done = []
    with pytest.raises(KeyError):
        with ctx.create_stream() as s:
            qd.launch_host_fn(_sleep_then(100, lambda: done.append(1)), stream=s)
            raise KeyError("boom")
    assert s.closed and done == []  # closed at once; the work is still queued
    ctx.synchronize()
    assert done == [1]  # ...and completes (destroy never drops work)


def test_destroy_with_pending_work_returns_at_once(ctx: qd.Context) -> None:
    done = []
    s = ctx.create_stream()
    qd.launch_host_fn(_sleep_then(200, lambda: done.append(1)), stream=s)
    t0 = time.monotonic()
    s.close()
    assert time.monotonic() - t0 < 0.15
    ctx.synchronize()
    assert done == [1]


def test_query(ctx: qd.Context, stream: qd.Stream) -> None:
    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(5), stream=stream)
    assert stream.query() is False and stream.is_done is False
    gate.set()
    stream.synchronize()
    assert stream.query() is True


def test_wait_event_orders_streams(ctx: qd.Context, kernels) -> None:
    a, b = ctx.create_stream(), ctx.create_stream()
    flag = ctypes.c_uint32(0)
    seen = []
    ev = ctx.create_event()
    kernels.spin_write.launch(ctypes.addressof(flag), ctypes.c_uint32(7), 50_000, stream=a)
    ev.record(stream=a)
    b.wait(ev)
    qd.launch_host_fn(lambda: seen.append(flag.value), stream=b)
    b.synchronize()
    assert seen == [7]
    with pytest.raises(qd.HandleTypeError):
        b.wait(ctx)  # neither an event nor a stream
    a.close()
    b.close()


def test_wait_stream_orders_later_work_after_the_other_streams_work(ctx: qd.Context) -> None:
    a, b = ctx.create_stream(), ctx.create_stream()
    gate = threading.Event()
    seen = []
    qd.launch_host_fn(gate.wait, stream=a)  # a is held until the gate opens
    qd.launch_host_fn(lambda: seen.append("a"), stream=a)
    b.wait(a)
    qd.launch_host_fn(lambda: seen.append("b"), stream=b)
    assert b.query() is False  # b waits for a's work, which the gate holds
    gate.set()
    b.synchronize()
    assert seen == ["a", "b"]
    events = ctx.stats().live_events
    for _ in range(100):
        b.wait(a)  # one pooled event serves every call of one thread
    assert ctx.stats().live_events == events
    with qd.Context("cpu") as other:
        b.wait(other.default_stream)  # another context of the backend: allowed (since 0.2)
    a.close()
    b.close()


def test_record_returns_a_new_event_recorded_on_the_stream(ctx: qd.Context,
                                                          stream: qd.Stream) -> None:
    gate = threading.Event()
    qd.launch_host_fn(gate.wait, stream=stream)
    ev = stream.record()
    assert isinstance(ev, qd.Event) and not ev.timing and ev.query() is False
    gate.set()
    ev.synchronize()
    start = stream.record(timing=True)
    end = stream.record(timing=True)
    end.synchronize()
    assert end - start >= 0.0 and start is not end


def test_leases_are_exclusive_bounded_and_released(ctx_pool2) -> None:
    ctx = ctx_pool2
    a = ctx.acquire_stream()
    b = ctx.acquire_stream()
    assert a.kind is qd.StreamKind.LEASED and a != b and a.handle != b.handle
    assert ctx.stats().stream_pool_leased == 2
    with pytest.raises(qd.PoolExhaustedError) as info:
        ctx.acquire_stream()
    assert info.value.status == qd.Status.ERROR_POOL_EXHAUSTED
    stale = a.handle
    a.close()
    assert a.closed
    with pytest.raises(qd.ObjectClosedError, match="released"):
        a.synchronize()
    # The C library agrees the old handle is stale, even after the slot is leased again.
    with ctx.acquire_stream() as c:
        assert c.handle != stale
        assert qd.lib.qd_stream_query(stale) == qd.Status.ERROR_INVALID_HANDLE
    assert c.closed
    b.release()
    assert ctx.stats().stream_pool_leased == 0


@pytest.fixture
def ctx_pool2():
    with qd.Context("cpu", stream_pool_size=2) as ctx:
        yield ctx


def test_lease_with_block_releases_without_waiting(ctx: qd.Context) -> None:
    done = []
    with ctx.acquire_stream() as s:
        qd.launch_host_fn(_sleep_then(100, lambda: done.append(1)), stream=s)
    assert s.closed and done == []
    assert ctx.stats().stream_pool_leased == 0
    ctx.synchronize()
    assert done == [1]


def test_garbage_collection_releases_and_destroys(ctx: qd.Context) -> None:
    base = ctx.stats()
    s = ctx.create_stream()
    lease = ctx.acquire_stream()
    ev = ctx.create_event()
    del s, lease, ev
    gc.collect()
    after = ctx.stats()
    assert after.live_streams == base.live_streams
    assert after.stream_pool_leased == 0 and after.live_events == base.live_events


def test_fork_children_wait_for_parent_and_join_waits_for_children(ctx: qd.Context,
                                                                   kernels) -> None:
    parent = ctx.create_stream()
    flag = ctypes.c_uint32(0)
    seen = []
    lock = threading.Lock()
    kernels.spin_write.launch(ctypes.addressof(flag), ctypes.c_uint32(1), 50_000,
                              stream=parent)
    children = parent.fork(3)
    assert len(children) == 3 and all(c.kind is qd.StreamKind.LEASED for c in children)
    assert ctx.stats().stream_pool_leased == 3
    finished = []

    def child_work(i: int):
        def run() -> None:
            with lock:
                seen.append(flag.value)  # the parent's producer must have finished
            time.sleep(0.02)
            with lock:
                finished.append(i)
        return run

    for i, c in enumerate(children):
        qd.launch_host_fn(child_work(i), stream=c)
    parent.join(children)
    assert all(c.closed for c in children)
    assert ctx.stats().stream_pool_leased == 0
    after_join = []
    qd.launch_host_fn(lambda: after_join.append(sorted(finished)), stream=parent)
    parent.synchronize()
    assert seen == [1, 1, 1]
    assert after_join == [[0, 1, 2]]
    parent.close()


def test_fork_and_join_errors_change_nothing(ctx_pool2) -> None:
    ctx = ctx_pool2
    parent = ctx.create_stream()
    with pytest.raises(qd.PoolExhaustedError):
        parent.fork(3)
    assert ctx.stats().stream_pool_leased == 0  # all or nothing
    with pytest.raises(qd.PoolExhaustedError):
        parent.fork(5000)  # more than any pool: refused before allocating 5000 slots
    with pytest.raises(qd.InvalidArgumentError):
        parent.fork(0)
    with pytest.raises(qd.ArgumentRangeError):
        parent.fork(-1)
    kids = parent.fork(2)
    owned = ctx.create_stream()
    with pytest.raises(qd.InvalidOperationError):
        parent.join([kids[0], owned])
    with pytest.raises(qd.InvalidArgumentError):
        parent.join([kids[0], kids[0]])
    with pytest.raises(qd.InvalidArgumentError):
        parent.join([])
    with pytest.raises(qd.HandleTypeError):
        parent.join([kids[0], None])
    assert not kids[0].closed and ctx.stats().stream_pool_leased == 2
    parent.join(kids)
    assert ctx.stats().stream_pool_leased == 0
    with pytest.raises(qd.ObjectClosedError):
        parent.join(kids)  # already joined (released)
    owned.close()
    parent.close()


def test_default_stream_wrappers(ctx: qd.Context) -> None:
    d1, d2 = ctx.default_stream, ctx.default_stream
    assert d1 == d2 and hash(d1) == hash(d2) and d1.kind is qd.StreamKind.DEFAULT
    d1.close()  # does nothing
    assert not d1.closed
    done = []
    with ctx.default_stream as d:
        qd.launch_host_fn(_sleep_then(20, lambda: done.append(1)), stream=d)
    assert done == [1] and not d.closed
    d.synchronize()


def test_active_stream_defaults_scopes_and_restores(ctx: qd.Context) -> None:
    assert ctx.get_active_stream() == ctx.default_stream
    a, b = ctx.create_stream(), ctx.create_stream()
    with ctx.active_stream(a) as got:
        assert got is a and ctx.get_active_stream() is a
        assert ctx.get_active_stream(refresh=True) is a
        with ctx.active_stream(b):
            assert ctx.get_active_stream() is b
        assert ctx.get_active_stream() is a
    assert ctx.get_active_stream() == ctx.default_stream
    assert ctx.get_active_stream(refresh=True) == ctx.default_stream
    with pytest.raises(ZeroDivisionError):
        with ctx.active_stream(a):
            1 / 0
    assert ctx.get_active_stream(refresh=True) == ctx.default_stream
    prev = ctx.set_active_stream(b)
    assert prev == ctx.default_stream
    assert ctx.set_active_stream(a) is b
    ctx.set_active_stream(prev)
    a.close()
    b.close()


def test_active_stream_errors_leave_it_unchanged(ctx: qd.Context) -> None:
    other = qd.Context("cpu")
    foreign = other.create_stream()
    s = ctx.create_stream()
    with ctx.active_stream(s):
        with pytest.raises(qd.WrongContextError):
            ctx.set_active_stream(foreign)
        with pytest.raises(qd.HandleTypeError):
            ctx.set_active_stream(None)
        with pytest.raises(qd.HandleTypeError):
            ctx.active_stream("stream")
        assert ctx.get_active_stream(refresh=True) is s
    other.close()
    s.close()


def test_active_stream_is_thread_local(ctx: qd.Context) -> None:
    streams = [ctx.create_stream() for _ in range(4)]
    barrier = threading.Barrier(len(streams))
    mismatches = []

    def worker(s: qd.Stream) -> None:
        assert ctx.get_active_stream() == ctx.default_stream
        for _ in range(200):
            with ctx.active_stream(s):
                barrier.wait()
                if ctx.get_active_stream() is not s:
                    mismatches.append("cached")
                if ctx.get_active_stream(refresh=True) is not s:
                    mismatches.append("c")
        if ctx.get_active_stream(refresh=True) != ctx.default_stream:
            mismatches.append("restore")

    threads = [threading.Thread(target=worker, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mismatches == []
    for s in streams:
        s.close()


def test_active_stream_set_by_c_is_seen_with_refresh(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    prev = ctypes.c_uint64()
    assert qd.lib.qd_stream_set_active(ctx.handle, s.handle, ctypes.byref(prev)) == 0
    seen = ctx.get_active_stream()  # nothing set from Python on this thread: asks C
    assert seen == s and seen.kind is qd.StreamKind.VIEW
    seen.close()  # a view owns nothing
    assert not seen.closed and not s.closed
    ctx.set_active_stream(ctx.default_stream)
    s.close()


def test_cuda_stream_protocol_on_cpu_is_not_supported(ctx: qd.Context,
                                                      stream: qd.Stream) -> None:
    with pytest.raises(qd.NotSupportedError, match="CUDA"):
        stream.__cuda_stream__()
    with pytest.raises(qd.NotSupportedError) as info:
        stream.native_handle
    assert info.value.status == qd.Status.ERROR_NOT_SUPPORTED


class _FakeCudaStream:
    def __init__(self, version: int = 0, handle: int = 0x1234) -> None:
        self.result = (version, handle)

    def __cuda_stream__(self):
        return self.result


def test_from_external_validation_on_cpu(ctx: qd.Context, stream: qd.Stream) -> None:
    with pytest.raises(qd.NotSupportedError):
        qd.Stream.from_external(ctx, _FakeCudaStream())  # the CPU backend has no native streams
    with pytest.raises(qd.ArgumentTypeError):
        qd.Stream.from_external(ctx, object())
    with pytest.raises(qd.InvalidArgumentError):
        qd.Stream.from_external(ctx, _FakeCudaStream(version=1))
    with pytest.raises(qd.ArgumentRangeError):
        qd.Stream.from_external(ctx, _FakeCudaStream(handle=-1))
    with pytest.raises(qd.NotSupportedError):
        qd.Stream.from_external(ctx, stream)  # a CPU qd stream has no __cuda_stream__ value
    with pytest.raises(qd.HandleTypeError):
        qd.Stream.from_external(None, _FakeCudaStream())


def test_temporary_stream_set_active_stays_alive_while_active(ctx: qd.Context) -> None:
    # torch.cuda.set_stream(torch.cuda.Stream()): the binding keeps the temporary alive.
    for make, counter in ((ctx.create_stream, "live_streams"),
                          (ctx.acquire_stream, "stream_pool_leased")):
        before = getattr(ctx.stats(), counter)
        ctx.set_active_stream(make())
        gc.collect()
        active = ctx.get_active_stream()
        assert not active.closed and active.kind in (qd.StreamKind.OWNED, qd.StreamKind.LEASED)
        assert ctx.get_active_stream(refresh=True) == active
        assert getattr(ctx.stats(), counter) == before + 1
        qd.launch_host_fn(lambda: None, stream=active)  # usable, not stale
        active.synchronize()
        ctx.set_active_stream(ctx.default_stream)  # no longer active: now it may go
        del active
        gc.collect()
        assert getattr(ctx.stats(), counter) == before


def test_active_temporary_stream_is_dropped_when_the_context_closes() -> None:
    ctx = qd.Context("cpu")
    ctx.set_active_stream(ctx.create_stream())
    ref = weakref.ref(ctx.get_active_stream())
    ctx.close()
    gc.collect()
    assert ref() is None


def test_foreign_stream_objects_as_stream_argument_on_cpu(ctx: qd.Context, kernels) -> None:
    # A __cuda_stream__ object is imported into the context the call names (kernel, event,
    # buffer); a CPU context has no native streams, so the import is refused as from_external's.
    fake = _FakeCudaStream()
    with pytest.raises(qd.NotSupportedError):
        kernels.noop.launch(stream=fake)
    with pytest.raises(qd.NotSupportedError):
        ctx.create_event().record(stream=fake)
    buf = qd.alloc(8, stream=ctx.default_stream)
    with pytest.raises(qd.NotSupportedError):
        qd.memset(buf, 0, stream=fake)
    with pytest.raises(qd.HandleTypeError, match="from_external"):
        qd.alloc(8, stream=fake)  # nothing names a context
    with pytest.raises(qd.HandleTypeError, match="from_external"):
        qd.launch_host_fn(lambda: None, stream=fake)
    for missing in (None, object(), 5):
        with pytest.raises(qd.HandleTypeError):
            kernels.noop.launch(stream=missing)
    qd.free(buf, stream=ctx.default_stream)


class _TorchStyle:
    """What older PyTorch streams offer: an int ``.cuda_stream`` and no ``__cuda_stream__``."""

    def __init__(self, handle: object) -> None:
        self.cuda_stream = handle


class _CupyStyle:
    """What older CuPy streams offer: an int ``.ptr``."""

    def __init__(self, handle: object) -> None:
        self.ptr = handle


def test_from_external_accepts_the_forms_users_hold(ctx: qd.Context) -> None:
    # Each form is parsed into a native handle and reaches qd_stream_import, which the CPU
    # backend refuses (it has no native streams): NotSupportedError, not a TypeError.
    for obj in (0x1234, _TorchStyle(0x1234), _CupyStyle(0x1234), _FakeCudaStream()):
        with pytest.raises(qd.NotSupportedError):
            qd.Stream.from_external(ctx, obj)


def test_from_external_wrong_objects_name_what_is_expected(ctx: qd.Context) -> None:
    for obj in (object(), None, True, 1.5, "0x1234", b"", _TorchStyle(None),
                _CupyStyle("x"), _TorchStyle(1.5)):
        with pytest.raises(TypeError) as info:
            qd.Stream.from_external(ctx, obj)
        assert isinstance(info.value, qd.ArgumentTypeError)
        message = str(info.value)
        for expected in ("__cuda_stream__", "int", ".cuda_stream", ".ptr"):
            assert expected in message, message
    for bad in (-1, 2**64, _TorchStyle(-1), _CupyStyle(2**64)):
        with pytest.raises(qd.ArgumentRangeError):
            qd.Stream.from_external(ctx, bad)
