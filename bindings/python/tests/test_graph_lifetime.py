"""What a graph keeps for its replays (README, "Graphs"): the Python buffers of captured copies
and the captured host callbacks live as long as a graph may replay them, and no longer. Nothing
here depends on timing: replays are held back with a callback that blocks on a latch."""

from __future__ import annotations

import array
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref
from typing import Any, Callable, List

import pytest

import qd
from conftest import subprocess_env


class _Closure:
    """A callable that can be watched with a weak reference (a lambda's cell cannot)."""

    def __init__(self, out: List[int], payload: int = 0) -> None:
        self.out = out
        self.payload = bytes(payload)

    def __call__(self) -> None:
        self.out.append(1)


def _latch(stream: qd.Stream) -> threading.Event:
    """Hold back everything queued on ``stream`` after this until the returned event is set."""
    gate = threading.Event()
    qd.launch_host_fn(lambda: gate.wait(20), stream=stream)
    return gate


def test_graph_holds_captured_copy_buffer_until_closed(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    src = qd.alloc(1024, stream=s)
    qd.memset(src, 7, stream=s)
    s.synchronize()
    target = array.array("B", bytes(1024))
    alive = weakref.ref(target)
    with s.capture() as graph:
        qd.memcpy(target, src, stream=s)
    del target
    for _ in range(3):
        graph.launch(stream=s)
        s.synchronize()
        gc.collect()
        assert alive() is not None, "a replay let go of the captured copy's buffer"
    assert alive().tobytes() == b"\x07" * 1024
    graph.close()
    s.synchronize()
    gc.collect()
    assert alive() is None, "closing the graph did not let go of the buffer"


def test_graph_close_keeps_buffer_until_queued_replays_ran(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    src = qd.alloc(1024, stream=s)
    qd.memset(src, 3, stream=s)
    target = array.array("B", bytes(1024))
    alive = weakref.ref(target)
    with s.capture() as graph:
        qd.memcpy(target, src, stream=s)
    del target
    gate = _latch(s)
    graph.launch(stream=s)  # queued behind the latch: it has not run
    graph.close()
    gc.collect()
    assert alive() is not None, "the graph let go of a buffer a queued replay still writes"
    gate.set()
    s.synchronize()
    gc.collect()
    assert alive() is None


_BYTEARRAY_REPLAYS = """
import sys
import qd
with qd.Context("cpu") as ctx:
    s = ctx.create_stream()
    src = qd.alloc(4096, stream=s)
    dst = qd.alloc(4096, stream=s)
    with s.capture() as graph:
        qd.memcpy(bytearray(4096), src, stream=s)  # a temporary, as the README allows
        tmp = bytearray(4096)
        qd.memcpy(tmp, src, stream=s)
        qd.memcpy(dst, tmp, stream=s)
        del tmp
    for i in range(1000):
        qd.memset(src, i % 251, stream=s)
        graph.launch(stream=s)
        if i % 100 == 99:
            out = bytearray(4096)
            qd.memcpy(out, dst, stream=s)
            s.synchronize()
            assert out == bytes([i % 251]) * 4096, (i, out[:8])
    graph.close()
print("ok")
"""


def test_graph_replays_temporary_bytearray_copies_1000_times() -> None:
    """Run in a child process (a use after free aborts it; with LD_PRELOAD of libasan and an
    ASan libqd, ASan reports it): 1,000 replays of copies through temporary bytearrays."""
    env = subprocess_env()
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    run = subprocess.run([sys.executable, "-c", _BYTEARRAY_REPLAYS], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-4000:]
    assert "AddressSanitizer" not in run.stderr, run.stderr[-4000:]


def _update_loop(ctx: qd.Context, s: qd.Stream, iterations: int, payload: int,
                 watch: Callable[[Any], None] = lambda c: None) -> qd.Graph:
    """The README's update loop: capture, replay, capture again with new values, update,
    close the fresh graph."""
    ran: List[int] = []
    target = bytearray(64)
    with s.capture() as graph:
        qd.launch_host_fn(_Closure(ran, payload), stream=s)
        qd.memcpy(target, bytes(64), stream=s)
    for i in range(iterations):
        graph.launch(stream=s)
        closure = _Closure(ran, payload)
        watch(closure)
        with s.capture() as fresh:
            qd.launch_host_fn(closure, stream=s)
            qd.memcpy(bytearray(64), bytes([i % 256]) * 64, stream=s)
        del closure
        graph.update(fresh)
        fresh.close()
        if i % 200 == 199:
            s.synchronize()
    s.synchronize()
    return graph


def test_update_loop_releases_captured_callbacks(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    refs: List[weakref.ref] = []
    graph = _update_loop(ctx, s, 500, 0, lambda c: refs.append(weakref.ref(c)))
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive <= 1, f"{alive} of {len(refs)} captured closures still alive"  # graph's own
    graph.close()
    s.synchronize()
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


def test_context_close_releases_captured_callbacks() -> None:
    refs: List[weakref.ref] = []
    c = qd.Context("cpu")
    s = c.create_stream()
    with s.capture() as graph:
        closure = _Closure([])
        refs.append(weakref.ref(closure))
        qd.launch_host_fn(closure, stream=s)
        del closure
    graph.launch(stream=s)
    c.close()  # the graph is never closed
    gc.collect()
    assert refs[0]() is None, "the context's close did not let go of a captured callback"
    del graph


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="under ASan, its quarantine keeps freed memory resident")
def test_update_loop_10000_iterations_grow_rss_less_than_5_mib(ctx: qd.Context) -> None:
    s = ctx.create_stream()
    _update_loop(ctx, s, 500, 4096).close()  # warm up: pools, caches, the allocator
    gc.collect()
    before = _rss()
    _update_loop(ctx, s, 10_000, 4096).close()
    s.synchronize()
    gc.collect()
    grown = _rss() - before
    assert grown < 5 * 2**20, f"RSS grew {grown / 2**20:.1f} MiB over 10,000 updates"


def test_lost_context_releases_closures_and_buffers_of_work_that_never_runs() -> None:
    """A Python host kernel that raises loses the context (README, "Host callbacks"): work
    queued behind it never runs, and the binding lets go of what it kept for that work when
    the context is closed."""
    c = qd.Context("cpu")
    s = c.create_stream()
    gate = threading.Event()

    def fail(info: Any, args: Any) -> None:
        gate.wait(20)
        raise RuntimeError("planted fault")

    kernel = qd.Kernel.from_host_fn(c, fail)
    kernel.launch(grid=1, block=1, stream=s)
    closure = _Closure([])
    closure_ref = weakref.ref(closure)
    qd.launch_host_fn(closure, stream=s)
    target = array.array("B", bytes(256))
    target_ref = weakref.ref(target)
    src = qd.alloc(256, stream=s)
    qd.memcpy(target, src, stream=s)
    del closure, target
    gate.set()
    with pytest.raises((qd.DeviceLostError, qd.CallbackError)):
        s.synchronize()
    c.close()
    gc.collect()
    assert closure_ref() is None, "a callback that can never run is still kept"
    assert target_ref() is None, "the buffer of a copy that can never run is still kept"


_FORKED = """
import gc, os, threading, weakref
import qd

class Closure:
    def __call__(self):
        pass

ctx = qd.Context("cpu")
s = ctx.create_stream()
gate = threading.Event()
qd.launch_host_fn(lambda: gate.wait(20), stream=s)
closure = Closure()
ref = weakref.ref(closure)
qd.launch_host_fn(closure, stream=s)
target = bytearray(256)
qd.memcpy(target, bytes(256), stream=s)
del closure
pid = os.fork()
if pid == 0:  # the child: the inherited context runs nothing
    code = 1
    try:
        ctx.close()
        gc.collect()
        target.append(0)  # no longer exported: a bytearray can be resized again
        code = 0 if ref() is None else 2
    finally:
        os._exit(code)
gate.set()
s.synchronize()
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
ctx.close()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_releases_closures_and_buffers_of_inherited_work() -> None:
    run = subprocess.run([sys.executable, "-c", _FORKED], env=subprocess_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.strip() == "child 0", (run.stdout, run.stderr[-4000:])
