"""``python -m qd``: the entry point a pip install has (README, "Timeline trace"):
``python -m qd trace view TRACE.json -o PAGE.html`` writes the page ``qd trace view`` writes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import qd
from conftest import BINDING_DIR, subprocess_env


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qd", *args], env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)


def _trace(path: Path) -> None:
    with qd.Context("cpu") as ctx:
        with qd.trace(str(path), ctx):
            s = ctx.create_stream()
            buf = qd.alloc(64, stream=s)
            qd.memset(buf, 1, stream=s)
            qd.launch_host_fn(lambda: None, stream=s)
            s.synchronize()


def test_python_m_qd_trace_view_writes_the_page(tmp_path: Path) -> None:
    trace, page = tmp_path / "x.json", tmp_path / "x.html"
    _trace(trace)
    run = _run("trace", "view", str(trace), "-o", str(page))
    assert run.returncode == 0, run.stderr
    assert f"wrote {page}" in run.stdout
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert '"traceEvents"' in html and "memset" in html
    tool = Path(os.environ.get("QD_BUILD_DIR", "")) / "tools" / "qd"
    if os.environ.get("QD_BUILD_DIR") and tool.exists():  # the C++ tool's page, byte for byte
        theirs = tmp_path / "tool.html"
        subprocess.run([str(tool), "trace", "view", str(trace), "-o", str(theirs)], check=True,
                       capture_output=True)
        assert page.read_bytes() == theirs.read_bytes()


def test_python_m_qd_usage_and_bad_input(tmp_path: Path) -> None:
    assert _run().returncode == 2
    assert _run("--help").returncode == 0 and "trace view" in _run("--help").stdout
    assert _run("trace", "view").returncode == 2
    assert _run("nonsense").returncode == 2
    missing = _run("trace", "view", str(tmp_path / "none.json"), "-o", str(tmp_path / "o.html"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    run = _run("trace", "view", str(bad), "-o", str(tmp_path / "o.html"))
    assert run.returncode == 1 and "is not a trace" in run.stderr
    assert not (tmp_path / "o.html").exists()


def test_the_wheel_carries_the_page_of_the_tool(tmp_path: Path) -> None:
    """The build backend copies tools/trace_view.cpp's page into the package
    (qd/trace_view.html), from which an installed qd reads it."""
    spec = importlib.util.spec_from_file_location(
        "qd_build_backend_under_test", BINDING_DIR / "build_backend" / "qd_build_backend.py")
    if spec is None or spec.loader is None:
        pytest.skip("the build backend cannot be loaded")
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    try:
        page = backend._trace_view_page(None).decode("utf-8")
    except RuntimeError as exc:  # not a checkout (an installed copy of the tests)
        pytest.skip(str(exc))
    from qd import _trace_view

    head, mark, tail = page.partition(_trace_view.MARK)
    assert mark and head.startswith("<!DOCTYPE html>") and tail.rstrip().endswith("</html>")
    assert (head, tail) == _trace_view._template()
