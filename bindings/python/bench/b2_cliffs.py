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
  ctypes record). Bar: s.record() at most 1.0 us; the ratio is information. With qd._speedups,
  the same rounds also run ``s.record()`` without it (a child process with QD_PYTHON_SPEEDUPS=0
  that times its own calls; same bar) and two floors: ``qd_event_record`` called from the
  compiled module once per Python call, and in a C loop (the C call alone), printed as
  ``B2 (floor) ...`` lines.

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
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from b2_launch import qd_setup  # noqa: E402  (also puts the in-tree package on sys.path)

import qd  # noqa: E402
from qd import _base, _lib, _stream  # noqa: E402  (the bare FFI functions, anchors)

Batch = Callable[[int], None]


def rounds(qd_run: Batch, anchor_run: Batch, sync: Callable[[], None], calls: int,
           n_rounds: int) -> Tuple[List[float], List[float]]:
    """Seconds per call of each side, one sample per round; the order flips every round."""
    ours, theirs = rounds_of([qd_run, anchor_run], sync, calls, n_rounds)
    return ours, theirs


def rounds_of(runs: List[Callable[[int], Optional[float]]], sync: Callable[[], None], calls: int,
              n_rounds: int) -> List[List[float]]:
    """Seconds per call of each of ``runs``, one sample per round: every round runs them all
    back to back, in an order that reverses every round. A run that returns a number timed
    itself (another process: the time of its calls, without the pipe's)."""
    for run in runs:  # warm-up
        run(max(1, calls // 4))
        sync()
    out: List[List[float]] = [[] for _ in runs]
    order = list(zip(runs, out))
    for r in range(n_rounds):
        for run, samples in (order if r % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            own = run(calls)
            t1 = time.perf_counter()  # enqueue cost only: stop before the sync
            sync()
            samples.append((own if own is not None else t1 - t0) / calls)
    return out


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


class RecordServer:
    """``s.record()`` in a child process without qd._speedups (``QD_PYTHON_SPEEDUPS=0``, the FFI
    of this run unless QD_PYTHON_FFI says otherwise): a side of this run's paired rounds that
    times its own calls (``--serve-record``)."""

    def __init__(self, backend: str) -> None:
        env = dict(os.environ, QD_PYTHON_SPEEDUPS="0")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve-record", "--backend", backend],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.ffi = self._read()  # its first line: the FFI it uses

    def _read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("b2_cliffs: the --serve-record child ended")
        return line.strip()

    def __call__(self, m: int) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{m}\n")
        return float(self._read())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def serve_record(backend: str) -> None:
    """The child of RecordServer: per line m read, m ``s.record()`` calls (each Event dropped
    at once), then the seconds they took, the stream synchronized after the clock stopped."""
    ctx = qd.Context(backend)
    s = ctx.create_stream(non_blocking=True)
    record = s.record
    print(qd.FFI, flush=True)
    for line in sys.stdin:
        m = int(line)
        t0 = time.perf_counter()
        for _ in range(m):
            record()
        t1 = time.perf_counter()
        s.synchronize()
        print(repr(t1 - t0), flush=True)
    s.close()
    ctx.close()


def bench_record(args: argparse.Namespace, ctx: qd.Context, s: qd.Stream) -> None:
    """``s.record()`` as users get it (through qd._speedups when it is in use), the bare
    ``qd_event_record`` through ctypes, and with qd._speedups: ``s.record()`` without it (a child
    process, QD_PYTHON_SPEEDUPS=0), and the bare call from the compiled module (one per Python
    call, and in a C loop: the C call alone). All sides in the same paired rounds."""
    record = s.record
    sp = _lib.SPEEDUPS if qd.Stream.record is not _stream._py_record else None

    def qd_record(m: int) -> None:
        for _ in range(m):
            record()

    ev = ctx.create_event()
    f = _lib._raw_ctypes("qd_event_record")  # ctypes in both FFI modes: the anchor is fixed
    sc, ec = ctypes.c_uint64(s.handle), ctypes.c_uint64(ev.handle)

    def bare(m: int) -> None:
        for _ in range(m):
            f(sc, ec)

    runs: List[Any] = [qd_record, bare]
    server = None
    if sp is not None:
        sh, eh, c_record = s.handle, ev.handle, sp.event_record

        def compiled_call(m: int) -> None:
            for _ in range(m):
                c_record(sh, eh)

        def c_loop(m: int) -> None:
            c_record(sh, eh, m)

        server = RecordServer(args.backend)
        runs += [server, compiled_call, c_loop]
    if qd.FFI != "ctypes":  # the same floor through the FFI in use, for information
        g, sc2, ec2 = _base._f_event_record, s._c, ev._c

        def bare_ffi(m: int) -> None:
            for _ in range(m):
                g(sc2, ec2)

        runs.append(bare_ffi)
    try:
        samples = rounds_of(runs, s.synchronize, args.calls, args.rounds)
    finally:
        if server is not None:
            server.close()
    ours, anchor = samples[0], samples[1]
    path = "qd._speedups" if sp is not None else f"{qd.FFI}, no qd._speedups"
    report("s.record()", ours, anchor, "bare qd_event_record (ctypes)", "absolute", 1.0)
    print(f"# s.record() above ran through {path}", flush=True)
    if server is not None:
        report(f"s.record() without qd._speedups ({server.ffi}, another process)", samples[2],
               anchor, "bare qd_event_record (ctypes)", "absolute", 1.0)
        for name, side in (("from qd._speedups, one Python call each", samples[3]),
                           ("from qd._speedups, in a C loop", samples[4])):
            print(f"B2 (floor) qd_event_record {name}: {statistics.median(side) * 1e6:.3f} us "
                  f"| min {min(side) * 1e6:.3f} max {max(side) * 1e6:.3f} us over "
                  f"{len(side)} rounds", flush=True)
    if qd.FFI != "ctypes":
        q, a = statistics.median(ours), statistics.median(samples[-1])
        print(f"B2 s.record() vs the FFI in use: qd {q * 1e6:.3f} us | bare qd_event_record "
              f"({qd.FFI}) {a * 1e6:.3f} us | ratio {q / a:.3f}x | bar - | INFO", flush=True)
    ev.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("cuda", "cpu"), default=None,
                        help="default: cuda if a CUDA device is usable, else cpu")
    parser.add_argument("--rounds", type=int, default=41, help="paired rounds (>= 5)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per side per round")
    parser.add_argument("--serve-record", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_record:  # the child of RecordServer
        serve_record(args.backend or "cpu")
        return
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
