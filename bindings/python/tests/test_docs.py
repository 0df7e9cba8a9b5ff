"""The README's quick starts are the example programs, verbatim, and they run; every public
function and method has a docstring and type hints."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest

import qd
from conftest import BINDING_DIR, subprocess_env

README = BINDING_DIR / "README.md"
EXAMPLES = ["examples/quickstart.py", "examples/quickstart_gpu.py"]


def _included_blocks():
    text = README.read_text()
    for m in re.finditer(r"<!-- include: (\S+) -->\n```python\n(.*?)```", text, re.S):
        yield m.group(1), m.group(2)


def test_readme_includes_every_example_verbatim() -> None:
    blocks = dict(_included_blocks())
    assert sorted(blocks) == sorted(EXAMPLES)
    for path, block in blocks.items():
        assert block == (BINDING_DIR / path).read_text(), f"README copy of {path} is stale"


def _run_example(path: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BINDING_DIR / path)], env=subprocess_env(),
                          capture_output=True, text=True, timeout=120, cwd=str(BINDING_DIR))


def test_cpu_quickstart_runs() -> None:
    result = _run_example("examples/quickstart.py")
    assert result.returncode == 0, result.stderr
    assert "ok: 1024 floats" in result.stdout and not result.stderr


def test_gpu_quickstart_runs() -> None:
    try:
        if qd.device_count("cuda") < 1:
            pytest.skip("no CUDA device")
    except qd.QdError as exc:
        pytest.skip(f"no qd CUDA backend: {exc}")
    result = _run_example("examples/quickstart_gpu.py")
    assert result.returncode == 0, result.stderr
    assert "ok: 1048576 ints" in result.stdout


def _public_callables():
    for name in qd.__all__:
        obj = getattr(qd, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("qd"):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in ("__init__", "__call__", "__enter__",
                                                          "__exit__", "__cuda_stream__"):
                    continue
                if inspect.isfunction(member):
                    yield f"{name}.{attr}", member
                elif isinstance(member, (classmethod, staticmethod)):
                    yield f"{name}.{attr}", member.__func__
                elif isinstance(member, property):
                    yield f"{name}.{attr}", member.fget


def test_public_api_has_docstrings_and_type_hints() -> None:
    missing_doc, missing_hints = [], []
    for name, fn in _public_callables():
        short = name.rsplit(".", 1)[-1]
        if not (fn.__doc__ or "").strip() and short not in (
                "__init__", "__enter__", "__exit__"):
            missing_doc.append(name)
        if "return" not in fn.__annotations__:
            missing_hints.append(name)
    assert not missing_doc, f"no docstring: {missing_doc}"
    assert not missing_hints, f"no return type hint: {missing_hints}"


def test_public_classes_are_documented_and_shown_as_qd() -> None:
    for name in qd.__all__:
        obj = getattr(qd, name)
        if inspect.isclass(obj):
            assert (obj.__doc__ or "").strip(), f"{name} has no docstring"
            if not issubclass(obj, qd.lib.qd_version.__class__.__mro__[1]):  # ctypes fn types
                assert obj.__module__ == "qd", f"{name}.__module__ is {obj.__module__}"
