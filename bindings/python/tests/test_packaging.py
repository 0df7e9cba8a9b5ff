"""`pip install --no-build-isolation bindings/python` in a fresh venv builds libqd, installs it
inside the package, and `import qd` then works from any directory with no environment variable.
tools/test-all runs the same path (and a `pip wheel` installed into a second venv) as its own
step; QD_TEST_SKIP_PIP=1 skips it here (it builds libqd: about a minute on 2 cores)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import qd
from conftest import BINDING_DIR

pytestmark = pytest.mark.skipif(os.environ.get("QD_TEST_SKIP_PIP") == "1",
                                reason="QD_TEST_SKIP_PIP=1")

CHECK = """
import os, sys, importlib.metadata as md
import qd
print(qd.__file__)
print(qd.library_path)
print(os.path.exists(os.path.join(os.path.dirname(qd.__file__), 'py.typed')))
print([r for r in md.requires('qd') or [] if 'extra ==' not in r])
with qd.Context('cpu') as ctx:
    with ctx.create_stream() as s:
        b = bytearray(4); qd.memset(b, 1, stream=s)
    print(bytes(b).hex())
"""


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def _clean_env() -> dict:
    env = dict(os.environ)
    for var in ("PYTHONPATH", "QD_LIBRARY", "QD_BUILD_DIR", "QD_PYTHON_FFI", "QD_PYTHON_SPEEDUPS"):
        env.pop(var, None)
    env["PIP_NO_INDEX"] = "1"  # never reach for a package index
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory):
    """A fresh venv (no system site-packages) with qd installed the README's way."""
    tmp = tmp_path_factory.mktemp("pip")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)])
    if made.returncode != 0:
        pytest.skip(f"cannot create a venv with {sys.executable}: {made.stderr.strip()[-300:]}")
    py = venv / "bin" / "python"
    env = _clean_env()
    if _run([str(py), "-m", "pip", "--version"], env=env).returncode != 0:
        pytest.skip(f"the venv of {sys.executable} has no pip (Debian: apt-get install python3-venv)")
    done = _run([str(py), "-m", "pip", "install", "--no-build-isolation", str(BINDING_DIR)],
                env=env, cwd=str(tmp))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv, tmp, env


def test_fresh_venv_install_carries_libqd(installed) -> None:
    venv, tmp, env = installed
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    check = _run([str(venv / "bin" / "python"), "-c", CHECK], env=env, cwd=str(elsewhere))
    assert check.returncode == 0, check.stderr
    where, library, typed, requires, data = check.stdout.split("\n")[:5]
    assert where.startswith(str(venv))  # the installed copy, not the source tree
    assert library == os.path.join(os.path.dirname(where), "libqd.so.0")  # the one it carries
    assert typed == "True"
    assert requires == "[]"  # no runtime dependencies (extras "test" and "cffi" only)
    assert data == "01010101"
    # The binding's sources (its generated low layer, _api.py, included) and the library are
    # there; nothing of the source tree leaks in (no qd-api.json: cffi reads _api.CDEF).
    pkg = Path(where).parent
    assert (pkg / "_api.py").exists() and not (pkg / "qd-api.json").exists()
    assert not list(venv.glob("lib/python*/site-packages/qd_build_backend*"))


def test_install_compiles_speedups_where_it_can(installed) -> None:
    venv, tmp, env = installed
    probe = _run([str(venv / "bin" / "python"), "-c",
                  "import sys, sysconfig, os; print(sys.version_info >= (3, 10) and "
                  "os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"],
                 env=env, cwd=str(tmp))
    check = _run([str(venv / "bin" / "python"), "-c",
                  "import qd, os; print(qd._lib.SPEEDUPS is not None); print(qd._lib.why_not_speedups);"
                  "print(sorted(os.listdir(os.path.dirname(qd.__file__))))"], env=env, cwd=str(tmp))
    assert check.returncode == 0, check.stderr
    in_use, why, files = check.stdout.split("\n")[:3]
    assert "_speedups.c" not in files  # the source stays in the source tree
    if probe.stdout.strip() != "True" or not shutil.which(os.environ.get("CC", "cc")):
        pytest.skip("this Python cannot build qd._speedups (needs >= 3.10, Python.h and cc)")
    assert in_use == "True", why
    assert "_speedups.abi3.so" in files


def test_qd_library_still_overrides(installed) -> None:
    venv, tmp, env = installed
    env = dict(env, QD_LIBRARY=os.path.abspath(qd.library_path))
    check = _run([str(venv / "bin" / "python"), "-c", "import qd; print(qd.library_path)"],
                 env=env, cwd=str(tmp))
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == os.path.abspath(qd.library_path)
    env["QD_LIBRARY"] = str(tmp / "no-such-libqd.so")
    check = _run([str(venv / "bin" / "python"), "-c", "import qd"], env=env, cwd=str(tmp))
    assert check.returncode != 0 and "QD_LIBRARY" in check.stderr  # never a silent fallback
