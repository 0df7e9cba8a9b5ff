"""Programs that exit with qd objects alive (run by test_shutdown.py, one scenario per process).

    python shutdown_scenarios.py SCENARIO CPU_MODULE_PATH

Each prints "ok SCENARIO" and exits while work is pending, objects are alive, or reference
cycles hold them. The test asserts exit status 0 and a clean stderr (docs/reliability.md,
category 12).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import time

import qd

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
def pending_callbacks(module_path: str) -> None:
    ctx = qd.Context("cpu")
    streams = [ctx.create_stream() for _ in range(3)]
    out = []
    for s in streams:
        qd.launch_host_fn(lambda: time.sleep(0.02), stream=s)
        qd.launch_host_fn(lambda: out.append(1), stream=s)
    lease = ctx.acquire_stream()
    qd.launch_host_fn(lambda: time.sleep(0.01), stream=lease)


@scenario
def reference_cycles(module_path: str) -> None:
    gc.disable()

    class Holder:
        pass

    h = Holder()
    h.self = h
    h.ctx = qd.Context("cpu")
    h.stream = h.ctx.create_stream()
    h.event = h.ctx.create_event(timing=True)
    h.callback = lambda: (time.sleep(0.01), h)  # callback -> holder -> stream -> ctx
    qd.launch_host_fn(h.callback, stream=h.stream)
    h.event.record(stream=h.stream)
    h.kernel = qd.Kernel.from_host_fn(h.ctx, lambda info, args: h and None)
    h.kernel.launch(grid=4, stream=h.stream)
    h.launcher = h.kernel.prepare(grid=2)
    h.launcher(stream=h.stream)
    with h.ctx.active_stream(h.stream):
        pass
    h.ctx.set_active_stream(h.stream)  # left active on purpose
    # (no `del h`: the callbacks read h when they run, so deleting it would make them raise)


@scenario
def pending_kernels_and_copies(module_path: str) -> None:
    ctx = qd.Context("cpu")
    module = ctx.load_module(module_path)
    spin = module.get_kernel("spin")
    spin_write = module.get_kernel("spin_write")
    s = ctx.create_stream()
    spin.launch(20_000, stream=s)
    buf = qd.alloc(4096, stream=s)
    qd.memset(buf, 1, stream=s)
    target = bytearray(4096)
    qd.memcpy(target, buf, stream=s)  # pending copy into a Python buffer
    flag = ctypes.c_uint32(0)
    children = s.fork(2)
    for c in children:
        spin_write.launch(ctypes.addressof(flag), ctypes.c_uint32(1), 5_000, stream=c)
    qd.launch_parallel([qd.Task(spin, 2_000, group=g) for g in range(3)], stream=s)
    with ctx.host_alloc(64):
        pass
    ev = ctx.create_event()
    ev.record(stream=children[0])


@scenario
def python_kernels_pending(module_path: str) -> None:
    ctx = qd.Context("cpu", cpu_worker_threads=2)
    hits = []

    def kernel(info, args):
        time.sleep(0.001)
        hits.append(info.block_idx[0])

    k = qd.Kernel.from_host_fn(ctx, kernel)
    for _ in range(4):
        k.launch(grid=8, stream=ctx.create_stream())


@scenario
def callback_owns_the_context(module_path: str) -> None:
    def make() -> None:
        ctx = qd.Context("cpu")
        s = ctx.create_stream()
        qd.launch_host_fn(lambda: (time.sleep(0.02), ctx, s), stream=s)

    make()  # the only reference to the context is the pending callback's


@scenario
def callback_owns_the_context_as_exit_begins(module_path: str) -> None:
    """callback_owns_the_context with its window held open: the last reference dies in the
    context's own callback, before exit, and that worker is held (the GIL released) right after
    qd_context_destroy refused to drain from it, until the main thread has begun exiting. Exit
    must wait for that destroy to finish; otherwise the worker comes back to a finalized
    interpreter and the process aborts."""
    from qd import _callbacks

    destroy = _callbacks._f_ctx_destroy
    refused = threading.Event()
    main_thread = threading.main_thread()

    def held_destroy(handle):
        status = destroy(handle)
        if status == qd.Status.ERROR_INVALID_OPERATION and not refused.is_set():
            refused.set()
            main_thread.join()  # returns once the main thread has begun exiting
        return status

    _callbacks._f_ctx_destroy = held_destroy
    made = threading.Event()

    def make() -> None:
        ctx = qd.Context("cpu")
        s = ctx.create_stream()
        qd.launch_host_fn(lambda: (made.wait(), ctx, s), stream=s)

    make()  # the only reference to the context is the pending callback's
    made.set()  # (only now: the callback must not drop its reference while make() holds one)
    refused.wait()  # the callback ran and let go of the context on its worker


@scenario
def daemon_thread_still_working(module_path: str) -> None:
    ctx = qd.Context("cpu")
    started = threading.Event()

    def loop() -> None:
        s = ctx.create_stream()
        try:
            while True:
                qd.launch_host_fn(lambda: time.sleep(0.001), stream=s)
                started.set()
                s.synchronize()
        except qd.InvalidHandleError:
            return  # the context was closed at exit, under this thread's feet

    threading.Thread(target=loop, daemon=True).start()
    started.wait(5)


@scenario
def lost_context_and_errors(module_path: str) -> None:
    ctx = qd.Context("cpu")
    module = ctx.load_module(module_path)
    s = ctx.create_stream()
    module.get_kernel("fault").launch(stream=s)
    try:
        s.synchronize()
    except qd.DeviceLostError:
        pass
    qd.launch_host_fn  # the lost context, its stream and module stay alive until exit

    def bad() -> None:
        raise RuntimeError("never reported")

    ctx2 = qd.Context("cpu")
    qd.launch_host_fn(bad, stream=ctx2.create_stream())  # unreported: a RuntimeWarning at exit
    globals()["keep"] = (ctx, s, module, ctx2)


@scenario
def module_globals_torn_down(module_path: str) -> None:
    """Finalizers that run after the binding's module globals are gone (teardown order)."""
    ctx = qd.Context("cpu")
    objs = [ctx.create_stream(), ctx.acquire_stream(), ctx.create_event(),
            ctx.load_module(module_path), qd.Kernel.from_host_fn(ctx, lambda i, a: None)]
    objs.append(objs[3].get_kernel("noop"))
    ctx.synchronize()
    from qd import _base, _callbacks, _context, _kernel, _lib, _memory, _stream

    for mod in (_base, _callbacks, _context, _kernel, _lib, _memory, _stream):
        for name in list(vars(mod)):
            if not name.startswith("__"):
                setattr(mod, name, None)
    del objs  # __del__ of every kind, with the globals gone: silent


@scenario
def sys_exit_inside_with(module_path: str) -> None:
    ctx = qd.Context("cpu")
    with ctx.create_stream() as s:
        qd.launch_host_fn(lambda: time.sleep(0.02), stream=s)
        print(f"ok {sys.argv[1]}", flush=True)
        sys.exit(0)


def main() -> None:
    name, module_path = sys.argv[1], sys.argv[2]
    SCENARIOS[name](module_path)
    print(f"ok {name}", flush=True)


if __name__ == "__main__":
    main()
