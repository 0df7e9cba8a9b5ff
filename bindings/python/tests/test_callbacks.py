"""Host callbacks (qd_launch_host_fn through one ctypes trampoline)."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import threading
import time
import weakref

import pytest

import qd
from conftest import subprocess_env
from qd import _callbacks


def test_callbacks_run_in_stream_order_after_kernels(ctx: qd.Context, kernels,
                                                     stream: qd.Stream) -> None:
    flag = ctypes.c_uint32(0)
    order = []
    kernels.spin_write.launch(ctypes.addressof(flag), ctypes.c_uint32(5), 30_000, stream=stream)
    for i in range(20):
        qd.launch_host_fn(lambda i=i: order.append((i, flag.value)), stream=stream)
    stream.synchronize()
    assert order == [(i, 5) for i in range(20)]


class _Callable:
    def __init__(self, out: list) -> None:
        self.out = out

    def __call__(self) -> None:
        self.out.append("ran")


def test_callable_is_kept_alive_until_it_ran_then_dropped(ctx: qd.Context,
                                                          stream: qd.Stream) -> None:
    gate = threading.Event()
    out: list = []
    qd.launch_host_fn(lambda: gate.wait(5), stream=stream)
    fn = _Callable(out)
    ref = weakref.ref(fn)
    qd.launch_host_fn(fn, stream=stream)
    del fn
    gc.collect()
    assert ref() is not None
    gate.set()
    stream.synchronize()
    gc.collect()
    assert out == ["ran"] and ref() is None


def test_exception_in_callback_is_reported_by_next_synchronize(ctx: qd.Context,
                                                               stream: qd.Stream) -> None:
    def bad() -> None:
        raise ValueError("callback bug")

    qd.launch_host_fn(bad, stream=stream)
    with pytest.raises(qd.CallbackError, match="callback bug") as info:
        stream.synchronize()
    assert isinstance(info.value.__cause__, ValueError)
    stream.synchronize()  # reported once
    qd.launch_host_fn(bad, stream=stream)
    qd.launch_host_fn(bad, stream=stream)
    ev = ctx.create_event().record(stream=stream)
    with pytest.raises(qd.CallbackError, match="1 more"):
        ev.synchronize()
    qd.launch_host_fn(bad, stream=stream)
    with pytest.raises(qd.CallbackError):
        ctx.synchronize()


def test_blocking_call_inside_callback_is_invalid_operation(ctx: qd.Context,
                                                            stream: qd.Stream) -> None:
    qd.launch_host_fn(stream.synchronize, stream=stream)
    with pytest.raises(qd.CallbackError) as info:
        stream.synchronize()
    assert isinstance(info.value.__cause__, qd.InvalidOperationError)
    assert info.value.__cause__.status == qd.Status.ERROR_INVALID_OPERATION


def test_callback_validation_and_failed_enqueue(ctx: qd.Context, kernels) -> None:
    s = ctx.create_stream()
    with pytest.raises(qd.ArgumentTypeError):
        qd.launch_host_fn(42, stream=s)
    with pytest.raises(TypeError):
        qd.launch_host_fn(lambda: None)  # stream= omitted
    with pytest.raises(qd.HandleTypeError):
        qd.launch_host_fn(lambda: None, stream=None)
    pending = len(_callbacks._pending)
    kernels.fault.launch(stream=s)
    with pytest.raises(qd.DeviceLostError):
        s.synchronize()
    ran = []
    with pytest.raises(qd.DeviceLostError):
        qd.launch_host_fn(lambda: ran.append(1), stream=s)
    assert len(_callbacks._pending) == pending and ran == []  # never called, not kept
    s.close()


def test_callbacks_from_many_threads(ctx: qd.Context) -> None:
    streams = [ctx.create_stream() for _ in range(4)]
    counts = [0] * len(streams)
    lock = threading.Lock()

    def bump(i: int) -> None:
        with lock:
            counts[i] += 1

    def worker(i: int) -> None:
        for _ in range(250):
            qd.launch_host_fn(lambda: bump(i), stream=streams[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx.synchronize()
    assert counts == [250] * len(streams)
    for s in streams:
        s.close()


def test_context_whose_last_reference_dies_in_its_own_callback(cpu_module_path) -> None:
    """qd refuses to destroy a context from its own worker; the binding defers it."""
    def make() -> int:
        ctx = qd.Context("cpu")
        s = ctx.create_stream()
        qd.launch_host_fn(lambda: (time.sleep(0.02), ctx, s), stream=s)
        return ctx.handle

    handle = make()
    gc.collect()
    deadline = time.monotonic() + 5
    while qd.lib.qd_context_synchronize(handle) != qd.Status.ERROR_INVALID_HANDLE:
        assert time.monotonic() < deadline, "the context was never destroyed"
        time.sleep(0.01)
    _callbacks._join_deferred()


def test_callback_error_is_a_qd_error_and_a_runtime_error(ctx: qd.Context,
                                                          stream: qd.Stream) -> None:
    def bad() -> None:
        raise KeyError("from the callback")

    qd.launch_host_fn(bad, stream=stream)
    with pytest.raises(qd.QdError) as info:  # the README: QdError is the base of all qd raises
        stream.synchronize()
    err = info.value
    assert isinstance(err, qd.CallbackError) and isinstance(err, RuntimeError)
    assert isinstance(err.__cause__, KeyError)
    assert err.status == 0 and err.status_name == "CallbackError"
    assert "from the callback" in str(err) and not str(err).startswith("QD_")
    import pickle
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is qd.CallbackError and again.message == err.message


def test_unreported_callback_exception_warns_when_its_context_closes() -> None:
    ctx = qd.Context("cpu")
    qd.launch_host_fn(lambda: 1 / 0, stream=ctx.default_stream)
    with pytest.warns(RuntimeWarning, match="ZeroDivisionError.*no synchronize"):
        ctx.close()  # drains: the callback runs and raises, and nobody will synchronize now


def test_unreported_callback_exception_warns_at_exit() -> None:
    code = ("import qd\n"
            "ctx = qd.Context('cpu')\n"
            "qd.launch_host_fn(lambda: 1 / 0, stream=ctx.default_stream)\n")  # then exit
    r = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "RuntimeWarning" in r.stderr and "ZeroDivisionError" in r.stderr, r.stderr
    assert "Exception ignored" not in r.stderr
