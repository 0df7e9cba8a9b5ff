"""`pip install --no-build-isolation bindings/python` works in a fresh venv and installs a pure
Python package with no runtime dependencies."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import qd
from conftest import BINDING_DIR


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.skipif(os.environ.get("QD_TEST_SKIP_PIP") == "1", reason="QD_TEST_SKIP_PIP=1")
def test_pip_install_in_fresh_venv(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(BINDING_DIR, src, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info", ".pytest_cache", "libqd.so*"))
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    if made.returncode != 0:
        pytest.skip(f"cannot create a venv with {sys.executable}: {made.stderr.strip()[-300:]}")
    py = venv / "bin" / "python"
    # Without build isolation the venv must already have the build backend: pip, setuptools,
    # and (setuptools < 70.1) wheel. On Debian: python3-venv python3-setuptools python3-wheel.
    probe = _run([str(py), "-c",
                  "import setuptools, pip\n"
                  "v = tuple(int(x) for x in setuptools.__version__.split('.')[:2])\n"
                  "if v < (70, 1): import wheel\n"])
    if probe.returncode != 0:
        pytest.skip("the venv lacks pip/setuptools/wheel for --no-build-isolation: "
                    + probe.stderr.strip().splitlines()[-1])
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PIP_NO_INDEX"] = "1"  # never reach for a package index
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    installed = _run([str(py), "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                      str(src)], env=env, cwd=str(tmp_path))
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    env["QD_LIBRARY"] = os.path.abspath(qd.library_path)
    check = _run([str(py), "-c",
                  "import qd, os, importlib.metadata as md\n"
                  "print(qd.__file__)\n"
                  "print(os.path.exists(os.path.join(os.path.dirname(qd.__file__), 'py.typed')))\n"
                  "print([r for r in md.requires('qd') or [] if 'extra ==' not in r])\n"
                  "with qd.Context('cpu') as ctx:\n"
                  "    with ctx.create_stream() as s:\n"
                  "        b = bytearray(4); qd.memset(b, 1, stream=s)\n"
                  "    print(bytes(b).hex())\n"],
                 env=env, cwd=str(tmp_path))
    assert check.returncode == 0, check.stderr
    where, typed, requires, data = check.stdout.split("\n")[:4]
    assert str(venv) in where  # the installed copy, not the source tree
    assert typed == "True"
    assert requires == "[]"  # zero runtime dependencies (only the optional "test" extra)
    assert data == "01010101"
