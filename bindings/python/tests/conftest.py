"""Shared fixtures of the binding's tests (pytest + the standard library only).

Which libqd: $QD_LIBRARY, else $QD_BUILD_DIR/src/libqd.so, else the binding's own discovery.
Which qd package: this checkout's bindings/python, unless QD_TEST_INSTALLED=1 (then whatever
``import qd`` finds, e.g. a pip-installed copy).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Iterator, List

import pytest

BINDING_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = BINDING_DIR.parent.parent
INCLUDE_DIR = Path(os.environ.get("QD_INCLUDE_DIR", REPO_DIR / "include"))
HEADER = INCLUDE_DIR / "qd" / "qd.h"
KERNELS_C = Path(__file__).resolve().parent / "kernels" / "cpu_kernels.c"

if not os.environ.get("QD_LIBRARY") and os.environ.get("QD_BUILD_DIR"):
    candidate = Path(os.environ["QD_BUILD_DIR"]) / "src" / "libqd.so"
    if candidate.exists():
        os.environ["QD_LIBRARY"] = str(candidate)
if os.environ.get("QD_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(BINDING_DIR))

import qd  # noqa: E402  (after the path set-up above)

# The validation pass of tools/test-all (tests/README.md): QD_VALIDATE=error makes every
# context validate and refuse a racing call (qd.HazardError), so a test with a hazard fails.
# A test that races on purpose, or sets validation itself, is marked races_on_purpose and
# skips there (it ran in the plain passes).
VALIDATION_PASS = os.environ.get("QD_VALIDATE", "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "races_on_purpose: plants hazards on purpose, or needs the validation mode "
        "off or set its own way; skipped in the validation pass (QD_VALIDATE set)")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    if not VALIDATION_PASS:
        return
    skip = pytest.mark.skip(reason="races on purpose, or sets validation itself: not in the "
                            "validation pass (tests/README.md)")
    for item in items:
        if item.get_closest_marker("races_on_purpose"):
            item.add_marker(skip)


CPU_KERNEL_NAMES = ("noop", "add_one", "spin_write", "spin", "append_log", "echo8", "fault")


def subprocess_env() -> Dict[str, str]:
    """Environment for child Python processes: the same qd package and the same libqd."""
    env = dict(os.environ)
    env["QD_LIBRARY"] = os.path.abspath(qd.library_path)
    if os.environ.get("QD_TEST_INSTALLED") != "1":
        env["PYTHONPATH"] = os.pathsep.join(
            [str(BINDING_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("PYTHONWARNINGS", None)
    return env


def compile_shared(source: Path, out: Path, extra: List[str] = ()) -> Path:
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler (cc) to build the CPU test module")
    cmd = [cc, "-std=c99", "-O2", "-shared", "-fPIC", f"-I{INCLUDE_DIR}", str(source), "-o",
           str(out), *extra]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="session")
def cpu_module_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Absolute path of the CPU test module (tests/kernels/cpu_kernels.c, built with cc)."""
    out = tmp_path_factory.mktemp("cpu_module") / "qd_py_test_kernels.so"
    return str(compile_shared(KERNELS_C, out))


@pytest.fixture
def ctx() -> Iterator[qd.Context]:
    context = qd.Context("cpu")
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def stream(ctx: qd.Context) -> Iterator[qd.Stream]:
    s = ctx.create_stream()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def kernels(ctx: qd.Context, cpu_module_path: str) -> SimpleNamespace:
    """The CPU test kernels, loaded into ``ctx``; ``.module`` is the Module."""
    module = ctx.load_module(cpu_module_path)
    ns = SimpleNamespace(module=module)
    for name in CPU_KERNEL_NAMES:
        setattr(ns, name, module.get_kernel(name))
    return ns
