#!/usr/bin/env python3
"""B2 (and the Python halves of B3 and B4): the qd binding against its anchors, in one process.

    python bench/b2_launch.py [--backend cuda|cpu] [--repeats 7] [--launches 1000]

Figures (one line each; per-call times are medians of --repeats runs, after a warm-up, with
qd and its anchors alternating inside every repeat; enqueue-only timers stop before the sync):

- launch of an empty kernel with 0 and with 8 uint64 arguments: qd ``kernel.launch`` (plain),
  qd ``Launcher`` (pre-packed), cuda.core ``launch()`` and a CuPy RawKernel, all on the same PTX.
  Bar (B2): the pre-packed qd launch with 8 args at most 1.0x cuda.core's.
- pooled stream acquire + release against ``torch.cuda.Stream()``. Bar (B3): no slower.
- active stream get + set against ``torch.cuda.current_stream()``. Bar (B4): at least 8x faster
  (ratio <= 0.125). Get alone, set alone and a ``with`` scope are printed for information.

Parts whose package (cuda.core, cupy, torch) or device is missing print a SKIP line. With no
CUDA device (or --backend cpu) only the qd figures run, on the CPU backend, with a CPU module
built by cc: a sanity check of the binding's overhead, not a B2 result.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import qd  # noqa: E402
from qd import _base as _core  # noqa: E402  (the bare FFI functions, for the floor figures)

# empty() and empty8(8 x u64): nvcc -ptx output, PTX ISA 7.0 for sm_75 and later.
PTX = b"""
.version 7.0
.target sm_75
.address_size 64
.visible .entry empty()
{
    ret;
}
.visible .entry empty8(.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,
                       .param .u64 a4, .param .u64 a5, .param .u64 a6, .param .u64 a7)
{
    ret;
}
.visible .entry mixed3(.param .u64 a0, .param .u32 a1, .param .f32 a2)
{
    ret;
}
.visible .entry mixed8(.param .u64 a0, .param .u64 a1, .param .u32 a2, .param .f32 a3,
                       .param .u64 a4, .param .f64 a5, .param .s64 a6, .param .u32 a7)
{
    ret;
}
"""

CPU_MODULE_C = rb"""
#include <stdint.h>
typedef struct qd_host_kernel_info qd_host_kernel_info;
#define EXPORT __attribute__((visibility("default")))
EXPORT int32_t empty(const qd_host_kernel_info *i, void *const *a) { (void)i; (void)a; return 0; }
EXPORT int32_t empty8(const qd_host_kernel_info *i, void *const *a) { (void)i; (void)a; return 0; }
EXPORT int32_t mixed3(const qd_host_kernel_info *i, void *const *a) { (void)i; (void)a; return 0; }
EXPORT int32_t mixed8(const qd_host_kernel_info *i, void *const *a) { (void)i; (void)a; return 0; }
"""

Batch = Callable[[int], None]


def measure(cands: Dict[str, Tuple[Batch, Callable[[], None]]], n: int,
            repeats: int) -> Dict[str, float]:
    """Median seconds per call of each candidate; candidates alternate inside each repeat."""
    for run, sync in cands.values():  # warm-up
        run(max(1, n // 10))
        sync()
    samples: Dict[str, List[float]] = {name: [] for name in cands}
    for _ in range(repeats):
        for name, (run, sync) in cands.items():
            t0 = time.perf_counter()
            run(n)
            t1 = time.perf_counter()  # stop before the sync: enqueue cost only
            sync()
            samples[name].append((t1 - t0) / n)
    return {name: statistics.median(v) for name, v in samples.items()}


def line(figure: str, ours: str, ours_s: float, anchor: Optional[str] = None,
         anchor_s: Optional[float] = None, bar: Optional[float] = None,
         bar_text: str = "") -> None:
    text = f"B2 {figure:<34} {ours:<16} {ours_s * 1e6:8.3f} us"
    if anchor is not None and anchor_s:
        ratio = ours_s / anchor_s
        text += f" | {anchor:<24} {anchor_s * 1e6:8.3f} us | ratio {ratio:6.3f}x"
        if bar is not None:
            text += f" | bar {bar_text or f'<= {bar:.3f}x'} {'PASS' if ratio <= bar else 'FAIL'}"
    print(text, flush=True)


def skip(what: str, why: str) -> None:
    print(f"B2 SKIP {what}: {why}", flush=True)


def qd_setup(backend: str, tmp: str):
    ctx = qd.Context(backend)
    if backend == "cuda":
        module = ctx.load_module(PTX)
    else:
        cc = shutil.which(os.environ.get("CC", "cc"))
        if not cc:
            sys.exit("b2_launch: the CPU run needs a C compiler (cc) for its kernel module")
        src = os.path.join(tmp, "b2_kernels.c")
        with open(src, "wb") as f:
            f.write(CPU_MODULE_C)
        lib = os.path.join(tmp, "b2_kernels.so")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", src, "-o", lib], check=True)
        module = ctx.load_module(lib)
    return ctx, module


def bench_launch(args, ctx, k0, k8, tmp: str) -> None:
    s = ctx.create_stream(non_blocking=True)
    n, reps = args.launches, args.repeats
    ints8 = list(range(1, 9))
    launcher0 = k0.prepare()
    launcher8 = k8.prepare(*ints8)

    def qd_plain0(m: int) -> None:
        launch = k0.launch
        for _ in range(m):
            launch(stream=s)

    def qd_pre0(m: int) -> None:
        for _ in range(m):
            launcher0(stream=s)

    def qd_plain8(m: int) -> None:
        launch = k8.launch
        a0, a1, a2, a3, a4, a5, a6, a7 = ints8
        for _ in range(m):
            launch(a0, a1, a2, a3, a4, a5, a6, a7, stream=s)

    def qd_pre8(m: int) -> None:
        for _ in range(m):
            launcher8(stream=s)

    def raw_floor(launcher):  # the bare FFI call the Launcher makes: the binding's floor
        f, sc = _core._f_launch, s._c
        kc, cfg, arr, n_c = launcher._kc, launcher._cfg_ref, launcher._arr_ref, launcher._n

        def run(m: int) -> None:
            for _ in range(m):
                f(sc, kc, cfg, arr, n_c)
        return run

    c0: Dict[str, Tuple[Batch, Callable[[], None]]] = {
        "qd plain": (qd_plain0, s.synchronize), "qd pre-packed": (qd_pre0, s.synchronize),
        "raw ctypes": (raw_floor(launcher0), s.synchronize)}
    c8: Dict[str, Tuple[Batch, Callable[[], None]]] = {
        "qd plain": (qd_plain8, s.synchronize), "qd pre-packed": (qd_pre8, s.synchronize),
        "raw ctypes": (raw_floor(launcher8), s.synchronize)}

    if args.backend == "cuda":
        core = None
        try:
            import cuda.core as core  # noqa: F811
            core.launch  # noqa: B018
        except (ImportError, AttributeError):
            try:
                import cuda.core.experimental as core  # noqa: F811
            except ImportError as exc:
                skip("cuda.core launch", f"cuda.core is not importable ({exc})")
                core = None
        if core is not None:
            dev = core.Device(0)
            dev.set_current()
            cs = dev.create_stream()
            code = core.ObjectCode.from_ptx(PTX)
            ck0, ck8 = code.get_kernel("empty"), code.get_kernel("empty8")
            cfg = core.LaunchConfig(grid=1, block=1)
            cargs8 = [ctypes.c_uint64(v) for v in ints8]
            launch = core.launch

            def core0(m: int) -> None:
                for _ in range(m):
                    launch(cs, cfg, ck0)

            def core8(m: int) -> None:
                a0, a1, a2, a3, a4, a5, a6, a7 = cargs8
                for _ in range(m):
                    launch(cs, cfg, ck8, a0, a1, a2, a3, a4, a5, a6, a7)

            c0["cuda.core launch()"] = (core0, cs.sync)
            c8["cuda.core launch()"] = (core8, cs.sync)
        try:
            import cupy
            import numpy
        except ImportError as exc:
            skip("CuPy RawKernel", f"cupy is not importable ({exc})")
        else:
            path = os.path.join(tmp, "b2.ptx")
            with open(path, "wb") as f:
                f.write(PTX)
            mod = cupy.RawModule(path=path)
            rk0, rk8 = mod.get_function("empty"), mod.get_function("empty8")
            cstream = cupy.cuda.Stream(non_blocking=True)
            nargs8 = tuple(numpy.uint64(v) for v in ints8)

            def cupy0(m: int) -> None:
                with cstream:
                    for _ in range(m):
                        rk0((1,), (1,), ())

            def cupy8(m: int) -> None:
                with cstream:
                    for _ in range(m):
                        rk8((1,), (1,), nargs8)

            c0["CuPy RawKernel"] = (cupy0, cstream.synchronize)
            c8["CuPy RawKernel"] = (cupy8, cstream.synchronize)
    else:
        skip("cuda.core / CuPy launch", "CPU backend: no GPU anchors")

    for nargs, cands in ((0, c0), (8, c8)):
        res = measure(cands, n, reps)
        core_t = res.get("cuda.core launch()")
        for variant in ("qd plain", "qd pre-packed"):
            bar = 1.0 if (nargs == 8 and variant == "qd pre-packed") else None
            line(f"launch {nargs} args, {variant[3:]}", "qd", res[variant],
                 "cuda.core launch()" if core_t else None, core_t, bar)
        if "CuPy RawKernel" in res:
            line(f"launch {nargs} args, pre-packed vs CuPy", "qd", res["qd pre-packed"],
                 "CuPy RawKernel", res["CuPy RawKernel"])
        line(f"(floor) launch {nargs} args, bare FFI", "qd_launch", res["raw ctypes"])
        if core_t:
            line(f"(anchor) launch {nargs} args", "cuda.core", core_t)
    s.close()


def bench_mixed(args, ctx, k3, k8) -> None:
    """``kernel.launch`` with ordinary mixed arguments (a buffer, ctypes scalars, Python int and
    float) against the same launch pre-packed (``kernel.prepare``). Bar (issue: launch speed):
    the plain launch adds at most 0.3 us over the pre-packed one with 3 to 8 arguments."""
    s = ctx.create_stream(non_blocking=True)
    n, reps = args.launches, args.repeats
    buf, buf2 = qd.alloc(256, stream=s), qd.alloc(256, stream=s)
    args3 = (buf, ctypes.c_uint32(64), ctypes.c_float(0.5))
    args8 = (buf, buf2, ctypes.c_uint32(64), ctypes.c_float(0.5), 123, 1.5, ctypes.c_int64(-1),
             ctypes.c_uint32(7))
    for k, a in ((k3, args3), (k8, args8)):
        pre = k.prepare(*a)
        launch = k.launch

        def plain(m: int, launch=launch, a=a) -> None:
            for _ in range(m):
                launch(*a, stream=s)

        def prepacked(m: int, pre=pre) -> None:
            for _ in range(m):
                pre(stream=s)

        res = measure({"plain": (plain, s.synchronize), "pre": (prepacked, s.synchronize)}, n,
                      reps)
        added = res["plain"] - res["pre"]
        print(f"B2 launch {len(a)} mixed args, plain {res['plain'] * 1e6:8.3f} us | pre-packed "
              f"{res['pre'] * 1e6:8.3f} us | added {added * 1e6:6.3f} us | bar <= 0.300 us "
              f"{'PASS' if added <= 0.3e-6 else 'FAIL'}", flush=True)
    # Two argument signatures in turn on one kernel (a buffer, then its address as an int: the
    # same sizes), against one signature: each keeps its launch function (no bar; the figure
    # shows the turn costs nothing). Then Stream.record(), which reuses pooled events.
    one = (buf, ctypes.c_uint32(64), ctypes.c_float(0.5))
    other = (int(buf), ctypes.c_uint32(64), ctypes.c_float(0.5))

    def single(m: int) -> None:
        for _ in range(m):
            k3.launch(*one, stream=s)

    def alternating(m: int) -> None:
        for i in range(m):
            k3.launch(*(other if i & 1 else one), stream=s)

    def record(m: int) -> None:
        for _ in range(m):
            s.record()

    res = measure({"one": (single, s.synchronize), "alt": (alternating, s.synchronize),
                   "record": (record, s.synchronize)}, n, reps)
    print(f"B2 launch 3 args, one signature {res['one'] * 1e6:8.3f} us | two in turn "
          f"{res['alt'] * 1e6:8.3f} us | s.record() {res['record'] * 1e6:8.3f} us", flush=True)
    qd.free(buf, stream=s)
    qd.free(buf2, stream=s)
    s.close()


def bench_streams(args, ctx) -> None:
    n, reps = args.stream_calls, args.repeats
    s = ctx.create_stream()
    acquire = ctx.acquire_stream

    def qd_pool(m: int) -> None:
        for _ in range(m):
            acquire().close()

    get = ctx.get_active_stream
    set_ = ctx.set_active_stream
    scope = ctx.active_stream

    def qd_get(m: int) -> None:
        for _ in range(m):
            get()

    def qd_get_c(m: int) -> None:
        for _ in range(m):
            get(refresh=True)

    def qd_set(m: int) -> None:
        for _ in range(m):
            set_(s)

    s2 = ctx.create_stream()

    def qd_get_set(m: int) -> None:  # alternating streams, as scopes do
        for _ in range(m // 2):
            set_(s2)
            get()
            set_(s)
            get()

    def qd_scope(m: int) -> None:
        for _ in range(m):
            with scope(s):
                pass

    f_acq, f_rel, f_set = _core._f_acquire, _core._f_release, _core._f_set_active
    cc = ctx._c

    def raw_pool(m: int) -> None:
        if qd.FFI == "cffi":
            ref = qd._lib.ffi.new("uint64_t[1]")
            for _ in range(m):
                f_acq(cc, ref)
                f_rel(ref[0])
            return
        out = ctypes.c_uint64()
        ref = ctypes.byref(out)
        for _ in range(m):
            f_acq(cc, ref)
            f_rel(out)

    def raw_set(m: int) -> None:
        prev = ctypes.c_uint64()
        ref, a, b = qd._lib.ref(prev), s._c, s2._c
        for _ in range(m // 2):
            f_set(cc, b, ref)
            f_set(cc, a, ref)

    nothing = lambda: None  # noqa: E731
    pool: Dict[str, Tuple[Batch, Callable[[], None]]] = {
        "qd": (qd_pool, nothing), "raw": (raw_pool, nothing)}
    active: Dict[str, Tuple[Batch, Callable[[], None]]] = {
        "qd get": (qd_get, nothing), "qd get (refresh)": (qd_get_c, nothing),
        "qd set": (qd_set, nothing), "qd get+set": (qd_get_set, nothing),
        "qd scope": (qd_scope, nothing), "raw set": (raw_set, nothing)}

    torch = None
    if args.backend == "cuda":
        try:
            import torch  # noqa: F811
            if not torch.cuda.is_available():
                skip("torch anchors", "torch has no CUDA device")
                torch = None
        except ImportError as exc:
            skip("torch anchors", f"torch is not importable ({exc})")
    else:
        skip("torch anchors", "CPU backend: no GPU anchors")
    if torch is not None:
        Stream = torch.cuda.Stream
        current = torch.cuda.current_stream
        tstream = Stream()
        tscope = torch.cuda.stream

        def torch_pool(m: int) -> None:
            for _ in range(m):
                Stream()

        def torch_current(m: int) -> None:
            for _ in range(m):
                current()

        def torch_scope(m: int) -> None:
            for _ in range(m):
                with tscope(tstream):
                    pass

        torch.cuda.set_stream(tstream)
        pool["torch.cuda.Stream()"] = (torch_pool, nothing)
        active["torch.cuda.current_stream()"] = (torch_current, nothing)
        active["with torch.cuda.stream(s)"] = (torch_scope, nothing)

    with ctx.active_stream(s):
        res_pool = measure(pool, n, reps)
        res = measure(active, n, reps)
    t_pool = res_pool.get("torch.cuda.Stream()")
    line("pool acquire+release", "qd", res_pool["qd"],
         "torch.cuda.Stream()" if t_pool else None, t_pool, 1.0)
    t_cur = res.get("torch.cuda.current_stream()")
    anchor = "torch.current_stream()" if t_cur else None
    line("active stream get+set (B4)", "qd", res["qd get+set"], anchor, t_cur, 0.125,
         ">= 8x faster")
    line("active stream get", "qd", res["qd get"], anchor, t_cur, 0.125, ">= 8x faster")
    line("active stream get (refresh=True)", "qd", res["qd get (refresh)"], anchor, t_cur)
    line("active stream set", "qd", res["qd set"], anchor, t_cur)
    t_scope = res.get("with torch.cuda.stream(s)")
    line("active stream with-scope", "qd", res["qd scope"],
         "with torch.cuda.stream()" if t_scope else None, t_scope)
    line("(floor) acquire+release, bare FFI", "2 C calls", res_pool["raw"])
    line("(floor) set, bare FFI", "1 C call", res["raw set"])
    for name in ("torch.cuda.Stream()", "torch.cuda.current_stream()",
                 "with torch.cuda.stream(s)"):
        if name in res_pool or name in res:
            line(f"(anchor) {name}", "torch", res_pool.get(name) or res[name])
    s.close()
    s2.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("cuda", "cpu"), default=None,
                        help="default: cuda if a CUDA device is usable, else cpu")
    parser.add_argument("--repeats", type=int, default=7, help="repeats (median; >= 5)")
    parser.add_argument("--launches", type=int, default=1000, help="launches per repeat")
    parser.add_argument("--stream-calls", type=int, default=20000,
                        help="pool / active-stream calls per repeat")
    args = parser.parse_args()
    args.repeats = max(5, args.repeats)
    if args.backend is None:
        try:
            args.backend = "cuda" if qd.device_count("cuda") > 0 else "cpu"
        except qd.QdError as exc:
            print(f"B2 note: no CUDA ({exc.status_name}); running the qd figures on the CPU "
                  "backend (a sanity check, not a B2 result)", flush=True)
            args.backend = "cpu"
    print(f"B2 python {sys.version.split()[0]}, qd {'.'.join(map(str, qd.version()))} "
          f"({qd.library_path}), FFI {qd.FFI}, qd._speedups "
          f"{'in use' if qd._lib.SPEEDUPS is not None else 'off: ' + qd._lib.why_not_speedups}, "
          f"backend {args.backend}, repeats {args.repeats}", flush=True)
    for name in ("cuda.core", "cupy", "torch"):
        try:
            mod = __import__(name, fromlist=["__version__"])
            print(f"B2 {name} {getattr(mod, '__version__', '?')}", flush=True)
        except ImportError:
            pass
    with tempfile.TemporaryDirectory() as tmp:
        ctx, module = qd_setup(args.backend, tmp)
        bench_launch(args, ctx, module.get_kernel("empty"), module.get_kernel("empty8"), tmp)
        bench_mixed(args, ctx, module.get_kernel("mixed3"), module.get_kernel("mixed8"))
        bench_streams(args, ctx)
        ctx.close()


if __name__ == "__main__":
    main()
