"""The build backend of the qd Python package (PEP 517, in-tree: pyproject.toml names it with
``backend-path``). It builds libqd with meson and ninja and puts it inside the package.

Why not setuptools or meson-python: a build without isolation can only use what the target
Python already has, and a fresh virtual environment of an arbitrary Python has neither
``wheel`` nor ``mesonpy`` (and no package index may be reachable to fetch them). This backend
needs the standard library only, plus the ``meson`` and ``ninja`` programs on PATH (the ones
that build libqd anyway; tools/bootstrap installs them). So

    pip install --no-build-isolation bindings/python
    pip wheel --no-build-isolation -w dist bindings/python

work in any virtual environment of any Python >= 3.8, with or without build isolation.

What a wheel holds: the ``qd`` package (``*.py``, ``py.typed``; ``qd/_api.py``, generated from
abi/qd-api.json, declares the C API to ctypes and cffi) and ``qd/libqd.so.0`` (a release build
of libqd, configured with ``-Dtests=false -Dbench=false -Dtools=false -Dexamples=false``); and,
when the building Python is CPython >= 3.10 with its headers and a C compiler (``cc``, or
``$CC``) is there, ``qd/_speedups.abi3.so`` (``qd/_speedups.c``: the four stream bookkeeping
calls and Kernel.launch's packing compiled, against the stable ABI). A wheel with it is tagged ``cp310-abi3-<platform>`` and
installs on any CPython >= 3.10 of the same OS and architecture; without it the package calls
libqd through ctypes/cffi only and the wheel is tagged ``py3-none-<platform>`` (any Python >= 3.8).

Config settings (``pip ... -C key=value`` / ``--config-settings key=value``), each also an
environment variable:

- ``builddir`` / ``QD_PY_BUILDDIR``: the meson build directory to use (and keep); by default a
  temporary one, removed afterwards.
- ``source`` / ``QD_SOURCE_DIR``: the qd source tree (the folder with qd's meson.build); by
  default the one this file is in (``bindings/python/build_backend`` -> ``../../..``), or the
  ``libqd/`` folder of an sdist.
- ``setup-args`` / ``QD_PY_SETUP_ARGS``: extra ``meson setup`` arguments (space-separated).
- ``speedups`` / ``QD_PY_SPEEDUPS``: ``auto`` (the default: build ``qd._speedups`` when it can be
  built, and say why not otherwise), ``yes`` (fail if it cannot be built) or ``no``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent  # bindings/python (or the root of an unpacked sdist)
NAME = "qd"

# What libqd's build needs from the qd source tree (the sdist carries these under libqd/).
_LIBQD_TREE = ("meson.build", "meson_options.txt", "include", "src", "abi", "cmake",
               "tools/trace_view.cpp")
_MESON_ARGS = ["--buildtype=release", "-Dtests=false", "-Dbench=false", "-Dtools=false",
               "-Dexamples=false"]


def _log(msg: str) -> None:
    print(f"qd build backend: {msg}", file=sys.stderr, flush=True)


def _setting(config: Optional[Mapping[str, Any]], key: str, env: str) -> Optional[str]:
    value = (config or {}).get(key)
    if isinstance(value, list):
        value = " ".join(value)
    return value or os.environ.get(env) or None


def _project() -> Dict[str, Any]:
    """Name, version and the rest of the metadata, read from pyproject.toml (no tomllib on
    Python < 3.11: the few fields used are read with regular expressions)."""
    text = (PACKAGE_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]

    def field(name: str) -> str:
        m = re.search(rf'^{name}\s*=\s*"([^"]*)"', project, re.M)
        if not m:
            raise RuntimeError(f"pyproject.toml: [project] has no {name}")
        return m.group(1)

    classifiers = re.search(r"^classifiers\s*=\s*\[(.*?)\]", project, re.M | re.S)
    return {
        "version": field("version"),
        "description": field("description"),
        "requires_python": field("requires-python"),
        "classifiers": re.findall(r'"([^"]+)"', classifiers.group(1)) if classifiers else [],
    }


def _source_dir(config: Optional[Mapping[str, Any]]) -> Path:
    explicit = _setting(config, "source", "QD_SOURCE_DIR")
    candidates = [Path(explicit)] if explicit else [PACKAGE_ROOT / "libqd", PACKAGE_ROOT.parent.parent]
    for path in candidates:
        build = path / "meson.build"
        if build.is_file() and re.search(r"project\(\s*'qd'", build.read_text(encoding="utf-8")):
            return path.resolve()
    raise RuntimeError(
        "cannot find qd's source tree (the folder with qd's meson.build) at "
        + " or ".join(str(p) for p in candidates)
        + ": build from a qd checkout (pip install bindings/python), from an sdist, or set "
        "QD_SOURCE_DIR / -C source=<path>")


def _program(name: str) -> str:
    found = os.environ.get(name.upper()) or shutil.which(name)
    if not found:
        raise RuntimeError(
            f"'{name}' is not on PATH: building libqd needs meson and ninja (Debian/Ubuntu: "
            "apt-get install meson ninja-build; or run tools/bootstrap)")
    return found


def _build_libqd(config: Optional[Mapping[str, Any]], scratch: Path) -> Path:
    """Configure and build libqd alone; return the path of the built libqd.so.<version>."""
    source = _source_dir(config)
    builddir = Path(_setting(config, "builddir", "QD_PY_BUILDDIR") or scratch / "libqd-build")
    extra = (_setting(config, "setup-args", "QD_PY_SETUP_ARGS") or "").split()
    meson, ninja = _program("meson"), _program("ninja")
    if (builddir / "build.ninja").exists():
        cmd = [meson, "setup", "--reconfigure", str(builddir), str(source)]
    else:
        cmd = [meson, "setup", str(builddir), str(source)]
    cmd += _MESON_ARGS + extra
    _log(f"libqd from {source}: {' '.join(cmd)}")
    # The build's own output goes to stderr: pip shows it with -v, and on failure.
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    subprocess.run([ninja, "-C", str(builddir)], check=True, stdout=sys.stderr)
    soname = builddir / "src" / "libqd.so.0"
    if not soname.exists():
        raise RuntimeError(f"the build made no {soname}")
    return soname.resolve()  # the real file, libqd.so.<version>


def _build_speedups(config: Optional[Mapping[str, Any]], scratch: Path) -> Optional[Path]:
    """Compile qd/_speedups.c against the stable ABI of CPython 3.10; the path of the module, or
    None (with the reason logged) when it cannot be built and the setting allows that."""
    mode = (_setting(config, "speedups", "QD_PY_SPEEDUPS") or "auto").strip().lower()
    if mode not in ("auto", "yes", "no"):
        raise RuntimeError(f"speedups={mode!r}: use auto, yes or no")
    if mode == "no":
        _log("qd._speedups: not built (speedups=no)")
        return None
    why = ""
    include = Path(sysconfig.get_paths()["include"])
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if sys.implementation.name != "cpython" or sys.version_info < (3, 10):
        why = f"needs CPython >= 3.10 (this is {sys.implementation.name} {sys.version.split()[0]})"
    elif not (include / "Python.h").exists():
        why = f"no Python.h in {include} (Debian/Ubuntu: apt-get install python3-dev)"
    elif not cc:
        why = "no C compiler (cc) on PATH"
    if not why:
        out = scratch / "_speedups.abi3.so"
        cmd = cc.split() + ["-O2", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{include}",
                            f"-I{_source_dir(config) / 'include'}",
                            str(PACKAGE_ROOT / NAME / "_speedups.c"), "-o", str(out)]
        _log(f"qd._speedups: {' '.join(cmd)}")
        done = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.STDOUT)
        if done.returncode == 0:
            return out
        why = f"the compiler failed (exit status {done.returncode})"
    if mode == "yes":
        raise RuntimeError(f"qd._speedups cannot be built (speedups=yes): {why}")
    _log(f"qd._speedups: not built, {why}; the package calls libqd through ctypes/cffi only")
    return None


def _trace_view_page(config: Optional[Mapping[str, Any]]) -> bytes:
    """The page of ``qd trace view`` (tools/trace_view.cpp), for ``python -m qd trace view``
    (qd/_trace_view.py, loaded by path: importing qd would load libqd)."""
    spec = importlib.util.spec_from_file_location(
        "_qd_trace_view", PACKAGE_ROOT / NAME / "_trace_view.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cpp = (_source_dir(config) / "tools" / "trace_view.cpp").read_text(encoding="utf-8")
    return module.template_from_source(cpp).encode("utf-8")


def _package_files() -> List[Tuple[Path, str]]:
    """(source file, path in the wheel) of the Python package itself."""
    out = []
    pkg = PACKAGE_ROOT / NAME
    for path in sorted(pkg.rglob("*")):
        rel = path.relative_to(PACKAGE_ROOT)
        if not path.is_file() or "__pycache__" in rel.parts:
            continue
        if path.name.startswith("libqd.so") or path.suffix in (".pyc", ".pyo", ".c", ".so") \
                or path.name == "trace_view.html":
            continue  # built files are added by the build
        out.append((path, rel.as_posix()))
    return out


# ----------------------------------------------------------------------------------------------
# Metadata and the wheel
# ----------------------------------------------------------------------------------------------


def _metadata(project: Dict[str, Any]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        "License: MIT",
        f"Requires-Python: {project['requires_python']}",
    ]
    lines += [f"Classifier: {c}" for c in project["classifiers"]]
    lines += ["Provides-Extra: test", 'Requires-Dist: pytest; extra == "test"',
              "Provides-Extra: cffi", 'Requires-Dist: cffi; extra == "cffi"',
              "Description-Content-Type: text/markdown", ""]
    readme = PACKAGE_ROOT / "README.md"
    body = readme.read_text(encoding="utf-8") if readme.exists() else ""
    return "\n".join(lines) + "\n" + body


def _tag(compiled: bool = False) -> str:
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"cp310-abi3-{platform}" if compiled else f"py3-none-{platform}"


def _dist_info() -> str:
    return f"{NAME}-{_project()['version']}.dist-info"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes, int]],
                 compiled: bool = False) -> str:
    project = _project()
    tag = _tag(compiled)
    dist_info = _dist_info()
    name = f"{NAME}-{project['version']}-{tag}.whl"
    files = list(files) + [
        (f"{dist_info}/METADATA", _metadata(project).encode("utf-8"), 0o644),
        (f"{dist_info}/WHEEL", (
            "Wheel-Version: 1.0\n"
            "Generator: qd_build_backend (bindings/python/build_backend)\n"
            "Root-Is-Purelib: false\n"
            f"Tag: {tag}\n").encode(), 0o644),
        (f"{dist_info}/top_level.txt", b"qd\n", 0o644),
    ]
    record = [_record_line(p, d) for p, d, _ in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    os.makedirs(wheel_directory, exist_ok=True)
    target = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data, mode in files:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    _log(f"wrote {target}")
    return name


# ----------------------------------------------------------------------------------------------
# PEP 517 hooks
# ----------------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []  # the standard library, meson and ninja


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, Any]] = None) -> str:
    dist_info = Path(metadata_directory) / _dist_info()
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata(_project()), encoding="utf-8")
    return dist_info.name


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    scratch = Path(tempfile.mkdtemp(prefix="qd-wheel-"))
    try:
        library = _build_libqd(config_settings, scratch)
        files = [(rel, src.read_bytes(), 0o644) for src, rel in _package_files()]
        files.append((f"{NAME}/libqd.so.0", library.read_bytes(), 0o755))
        files.append((f"{NAME}/trace_view.html", _trace_view_page(config_settings), 0o644))
        speedups = _build_speedups(config_settings, scratch)
        if speedups is not None:
            files.append((f"{NAME}/_speedups.abi3.so", speedups.read_bytes(), 0o755))
        return _write_wheel(wheel_directory, files, compiled=speedups is not None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_sdist(sdist_directory: str,
                config_settings: Optional[Mapping[str, Any]] = None) -> str:
    """A source distribution that builds on its own: the binding, plus libqd's sources under
    ``libqd/`` (found there by ``_source_dir``)."""
    project = _project()
    base = f"{NAME}-{project['version']}"
    source = _source_dir(config_settings)
    name = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)

    def skip(info: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
        parts = Path(info.name).parts
        if "__pycache__" in parts or info.name.endswith((".pyc", ".so.0", ".so")) or \
                ".pytest_cache" in parts or Path(info.name).name.startswith("libqd.so"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for entry in ("pyproject.toml", "README.md", "build_backend", NAME, "tests", "examples",
                      "bench", "test"):
            path = PACKAGE_ROOT / entry
            if path.exists():
                tar.add(str(path), f"{base}/{entry}", filter=skip)
        for entry in _LIBQD_TREE:
            path = source / entry
            if path.exists():
                tar.add(str(path), f"{base}/libqd/{entry}", filter=skip)
        pkg_info = _metadata(project).encode("utf-8")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
    _log(f"wrote {os.path.join(sdist_directory, name)}")
    return name
