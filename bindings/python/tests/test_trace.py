"""The timeline trace from Python (qd.h, "Timeline trace"): ``with qd.trace(path)`` covers every
open context and every context created inside the block; ``with qd.trace(path, ctx)`` only the
named ones; ``Context.start_trace/stop_trace/flush_trace``; the file holds exactly the block's
work (memsets of distinct sizes before, inside and after tell them apart); misuse raises the
C status's exception."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import qd


def _memsets(path: Path) -> list:
    """The byte counts of the memset slices in a trace file, sorted."""
    data = json.loads(path.read_text())
    return sorted(e["args"]["bytes"] for e in data["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == "memset")


def _processes(path: Path) -> int:
    data = json.loads(path.read_text())
    return sum(1 for e in data["traceEvents"] if e.get("name") == "process_name")


def test_trace_block_covers_exactly_its_work(ctx: qd.Context, tmp_path: Path) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(4096, stream=s)
    out = tmp_path / "t.json"
    qd.memset(buf, 1, 11, stream=s)
    with qd.trace(out) as t:
        assert t.contexts == [ctx]
        for _ in range(3):
            qd.memset(buf, 2, 22, stream=s)
    qd.memset(buf, 3, 33, stream=s)
    s.synchronize()
    assert _memsets(out) == [22, 22, 22]


def test_trace_block_covers_contexts_created_inside(ctx: qd.Context, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    with qd.trace(out) as t:
        with qd.Context("cpu") as inner:
            s = inner.create_stream()
            buf = qd.alloc(64, stream=s)
            qd.memset(buf, 1, 7, stream=s)
            assert inner in t.contexts
            qd.free(buf, stream=s)
        # closed inside the block: its close wrote its part
        assert _memsets(out) == [7]
        s2 = ctx.create_stream()
        buf2 = qd.alloc(64, stream=s2)
        qd.memset(buf2, 1, 8, stream=s2)
    assert _memsets(out) == [7, 8]
    assert _processes(out) == 2
    qd.free(buf2, stream=s2)


def test_trace_named_context_only(ctx: qd.Context, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    with qd.Context("cpu") as other:
        so = other.create_stream()
        bo = qd.alloc(64, stream=so)
        s = ctx.create_stream()
        buf = qd.alloc(64, stream=s)
        with qd.trace(out, ctx):
            qd.memset(buf, 1, 5, stream=s)
            qd.memset(bo, 1, 6, stream=so)
        assert _memsets(out) == [5]
        assert _processes(out) == 1
        other.start_trace(tmp_path / "o.json")  # not traced by the block: can start its own
        other.stop_trace()
        qd.free(bo, stream=so)
        so.synchronize()


def test_trace_flush_writes_so_far(ctx: qd.Context, tmp_path: Path) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    out = tmp_path / "t.json"
    with qd.trace(out, ctx) as t:
        qd.memset(buf, 1, 5, stream=s)
        t.flush()
        assert _memsets(out) == [5]
        qd.memset(buf, 1, 6, stream=s)
    assert _memsets(out) == [5, 6]


def test_context_methods_and_misuse(ctx: qd.Context, tmp_path: Path) -> None:
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    with pytest.raises(qd.InvalidOperationError):
        ctx.stop_trace()
    with pytest.raises(qd.InvalidOperationError):
        ctx.flush_trace()
    with pytest.raises(qd.InvalidArgumentError, match="cannot be written"):
        ctx.start_trace(tmp_path / "missing" / "t.json")
    with pytest.raises(qd.InvalidArgumentError, match="directory"):
        ctx.start_trace(tmp_path)
    out = tmp_path / "t.json"
    ctx.start_trace(str(out))
    with pytest.raises(qd.InvalidOperationError, match="already"):
        ctx.start_trace(out)
    with pytest.raises(qd.InvalidOperationError, match="already"):
        with qd.trace(tmp_path / "u.json", ctx):
            pass
    qd.memset(buf, 1, 9, stream=s)
    ctx.stop_trace()
    assert _memsets(out) == [9]
    assert not (tmp_path / "u.json").exists()
    ctx.close()
    with pytest.raises(qd.ObjectClosedError):
        ctx.start_trace(out)


def test_trace_block_with_bad_path_starts_nothing(ctx: qd.Context, tmp_path: Path) -> None:
    with pytest.raises(qd.InvalidArgumentError):
        with qd.trace(tmp_path / "missing" / "t.json"):
            pass  # pragma: no cover
    with pytest.raises(qd.InvalidOperationError):
        ctx.stop_trace()  # the failed block left nothing on


def test_trace_ring_drops_newest(ctx: qd.Context, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QD_TRACE_CAPACITY", "2")
    s = ctx.create_stream()
    buf = qd.alloc(64, stream=s)
    out = tmp_path / "t.json"
    with qd.trace(out, ctx):
        for n in (1, 2, 3, 4):
            qd.memset(buf, 1, n, stream=s)
    assert _memsets(out) == [1, 2]
    assert "trace full: 2 operations not recorded" in out.read_text()


def test_trace_pathlike_and_str_agree(ctx: qd.Context, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    with qd.trace(str(out), ctx):
        pass
    assert _processes(out) == 1
    assert os.path.exists(out)
