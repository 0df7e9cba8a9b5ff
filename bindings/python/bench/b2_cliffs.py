#!/usr/bin/env python3
"""The Python cliffs: what ordinary code pays over the binding's fast path, beside its anchor.

    python bench/b2_cliffs.py [--backend cuda|cpu] [--rounds 41] [--calls 1000]

Three figures, each against the anchor it must stay close to, measured in one process:

- ``kernel.launch(*args, stream=s)`` with 3 and with 8 mixed arguments (a buffer, ctypes
  scalars, a Python int and float: the kernels ``mixed3`` / ``mixed8`` of ``b2_launch.py``),
  against the same launch pre-packed (``kernel.prepare``). Bar: at most +0.3 us.
- two argument signatures in turn on one kernel (a buffer, then its address as an int),
  against one signature. Bar: at most 1.2x.
- ``s.record()`` (an Event each call, dropped at once as most code does), against a bare
  ``qd_event_record`` of one event through ctypes (no argument conversion: the floor of any
  binding's record). Bar: s.record() at most 1.0 us; the ratio is information.

Each figure runs ``--rounds`` short rounds of ``--calls`` calls per side; the two sides of a
round run back to back, in an order that flips every round, and the verdict is on the median of
the round-by-round differences (launch) or ratios (signatures), so the host's drift cancels
(bench/README.md, "Small margins are judged on pairs"). Enqueue only: each clock stops before
the stream is synchronized. Lines follow bench/README.md:

    B2 <name>: qd <value> us | anchor <value> us | ratio <x> | bar <text> | PASS/MISS

with ``#`` lines giving each side's min / median / max, and a summary table at the end. The CPU
backend (the default with no CUDA device) builds its kernels with cc. Never a test: exits 0
whether a bar is met or missed.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from b2_launch import qd_setup  # noqa: E402  (also puts the in-tree package on sys.path)

import qd  # noqa: E402
from qd import _base, _lib  # noqa: E402  (the bare FFI functions, for the anchors)

Batch = Callable[[int], None]


def rounds(qd_run: Batch, anchor_run: Batch, sync: Callable[[], None], calls: int,
           n_rounds: int) -> Tuple[List[float], List[float]]:
    """Seconds per call of each side, one sample per round; the order flips every round."""
    for run in (qd_run, anchor_run):  # warm-up
        run(max(1, calls // 4))
        sync()
    ours: List[float] = []
    theirs: List[float] = []
    for r in range(n_rounds):
        order = ((qd_run, ours), (anchor_run, theirs))
        for run, out in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            run(calls)
            t1 = time.perf_counter()  # enqueue cost only: stop before the sync
            sync()
            out.append((t1 - t0) / calls)
    return ours, theirs


SUMMARY: List[Tuple[str, str, str]] = []


def report(name: str, ours: List[float], theirs: List[float], anchor: str, judge: str,
           bar: float) -> None:
    """One figure: ``judge`` is "added" (median paired difference, bar in us), "ratio"
    (median paired ratio, bar in x) or "absolute" (qd's median, bar in us)."""
    q, a = statistics.median(ours), statistics.median(theirs)
    ratio = statistics.median(o / t for o, t in zip(ours, theirs))
    added = statistics.median(o - t for o, t in zip(ours, theirs))
    if judge == "added":
        value, text = added * 1e6, f"added <= +{bar:.3f} us (paired: {added * 1e6:+.3f} us)"
    elif judge == "ratio":
        value, text = ratio, f"<= {bar:.3f}x (paired)"
    else:
        value, text = q * 1e6, f"qd <= {bar:.3f} us"
    verdict = "PASS" if value <= bar else "MISS"
    print(f"B2 {name}: qd {q * 1e6:.3f} us | {anchor} {a * 1e6:.3f} us | ratio {ratio:.3f}x "
          f"| bar {text} | {verdict}", flush=True)
    for side, v in (("qd", ours), (anchor, theirs)):
        print(f"# {name} {side}: min {min(v) * 1e6:.3f} median {statistics.median(v) * 1e6:.3f} "
              f"max {max(v) * 1e6:.3f} us over {len(v)} rounds", flush=True)
    SUMMARY.append((name, text, verdict))


def bench_mixed(args: argparse.Namespace, ctx: qd.Context, k3: qd.Kernel, k8: qd.Kernel,
                s: qd.Stream, buf: qd.DeviceBuffer, buf2: qd.DeviceBuffer) -> None:
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

        ours, theirs = rounds(plain, prepacked, s.synchronize, args.calls, args.rounds)
        report(f"launch {len(a)} mixed args, plain", ours, theirs, "pre-packed", "added", 0.3)


def bench_signatures(args: argparse.Namespace, k3: qd.Kernel, s: qd.Stream,
                     buf: qd.DeviceBuffer) -> None:
    one = (buf, ctypes.c_uint32(64), ctypes.c_float(0.5))
    other = (int(buf), ctypes.c_uint32(64), ctypes.c_float(0.5))  # the same bytes, other types
    launch = k3.launch
    # Both sides pick their arguments the same way, so the loops cost the same.
    pairs_one, pairs_two = (one, one), (one, other)

    def single(m: int) -> None:
        for i in range(m):
            launch(*pairs_one[i & 1], stream=s)

    def in_turn(m: int) -> None:
        for i in range(m):
            launch(*pairs_two[i & 1], stream=s)

    ours, theirs = rounds(in_turn, single, s.synchronize, args.calls, args.rounds)
    report("launch 3 args, two signatures in turn", ours, theirs, "one signature", "ratio", 1.2)


def bench_record(args: argparse.Namespace, ctx: qd.Context, s: qd.Stream) -> None:
    record = s.record

    def qd_record(m: int) -> None:
        for _ in range(m):
            record()

    ev = ctx.create_event()
    f = _lib._raw_ctypes("qd_event_record")  # ctypes in both FFI modes: the anchor is fixed
    sc, ec = ctypes.c_uint64(s.handle), ctypes.c_uint64(ev.handle)

    def bare(m: int) -> None:
        for _ in range(m):
            f(sc, ec)

    ours, theirs = rounds(qd_record, bare, s.synchronize, args.calls, args.rounds)
    report("s.record()", ours, theirs, "bare qd_event_record (ctypes)", "absolute", 1.0)
    if qd.FFI != "ctypes":  # the same floor through the FFI in use, for information
        g, sc2, ec2 = _base._f_event_record, s._c, ev._c

        def bare_ffi(m: int) -> None:
            for _ in range(m):
                g(sc2, ec2)

        ours, theirs = rounds(qd_record, bare_ffi, s.synchronize, args.calls, args.rounds)
        q, a = statistics.median(ours), statistics.median(theirs)
        print(f"B2 s.record() vs the FFI in use: qd {q * 1e6:.3f} us | bare qd_event_record "
              f"({qd.FFI}) {a * 1e6:.3f} us | ratio {q / a:.3f}x | bar - | INFO", flush=True)
    ev.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("cuda", "cpu"), default=None,
                        help="default: cuda if a CUDA device is usable, else cpu")
    parser.add_argument("--rounds", type=int, default=41, help="paired rounds (>= 5)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per side per round")
    args = parser.parse_args()
    args.rounds = max(5, args.rounds)
    if args.backend is None:
        try:
            args.backend = "cuda" if qd.device_count("cuda") > 0 else "cpu"
        except qd.QdError as exc:
            print(f"B2 note: no CUDA ({exc.status_name}); CPU backend", flush=True)
            args.backend = "cpu"
    speedups = "in use" if _lib.SPEEDUPS is not None else "off: " + _lib.why_not_speedups
    print(f"B2 cliffs: python {sys.version.split()[0]}, qd {'.'.join(map(str, qd.version()))} "
          f"({qd.library_path}), FFI {qd.FFI}, qd._speedups {speedups}, backend "
          f"{args.backend}, {args.rounds} rounds x {args.calls} calls", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        ctx, module = qd_setup(args.backend, tmp)
        s = ctx.create_stream(non_blocking=True)
        buf, buf2 = qd.alloc(256, stream=s), qd.alloc(256, stream=s)
        k3, k8 = module.get_kernel("mixed3"), module.get_kernel("mixed8")
        bench_mixed(args, ctx, k3, k8, s, buf, buf2)
        bench_signatures(args, k3, s, buf)
        bench_record(args, ctx, s)
        qd.free(buf, stream=s)
        qd.free(buf2, stream=s)
        s.synchronize()
        s.close()
        ctx.close()
    print("| figure | bar | verdict |\n|---|---|---|")
    for name, text, verdict in SUMMARY:
        print(f"| {name} | {text} | {verdict} |")


if __name__ == "__main__":
    main()
