"""The C boundary: find and load libqd, and declare every function of qd.h to it.

What qd.h declares (struct mirrors, function pointer types, the function table, cffi's
declarations) is in :mod:`qd._api`, which abi/gen writes from abi/qd-api.json; it is re-exported
here. The rest of the package calls the functions declared in :data:`FUNCTIONS` (with
``argtypes`` and ``restype``) through :data:`lib`, or, on hot paths, through :func:`raw` copies
of the same symbols that have no ``argtypes``: those are called only with arguments that are
already ctypes instances of the exact C type, which skips ctypes' per-argument conversion (about
half the cost of a call).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from ctypes import c_char_p, c_float, c_uint8, c_uint32, c_uint64, c_void_p
from typing import Dict, List, Optional, Sequence, Tuple

# _errors first: it defines QdError, then imports _api, whose exception classes derive from it.
from . import _errors  # noqa: F401
from ._api import (
    ABI_MAJOR,
    ABI_MINOR,
    CDEF,
    FUNCTIONS,
    SIGNATURES,
    STRUCTS,
    Arg,
    ContextDesc,
    ContextStats,
    DeviceInfo,
    Hazard,
    HazardFn,
    HostFn,
    HostKernelFn,
    HostStatusFn,
    HostKernelInfo,
    LaunchAttr,
    LaunchConfig,
    StreamDesc,
    Task,
)

__all__ = [
    "ABI_MAJOR",
    "ABI_MINOR",
    "Arg",
    "CDEF",
    "ContextDesc",
    "ContextStats",
    "DeviceInfo",
    "FUNCTIONS",
    "HostFn",
    "Hazard",
    "HazardFn",
    "HostKernelFn",
    "HostStatusFn",
    "HostKernelInfo",
    "LaunchAttr",
    "LaunchConfig",
    "LibraryNotFoundError",
    "SIGNATURES",
    "STRUCTS",
    "StreamDesc",
    "Task",
    "library_path",
    "lib",
    "raw",
    "C",
    "CFFI",
    "FFI",
    "SPEEDUPS",
    "H",
    "U32",
    "U64",
    "U8",
    "NULL",
    "ffi",
    "ref",
]

# ----------------------------------------------------------------------------------------------
# Finding and loading libqd.
# ----------------------------------------------------------------------------------------------


class LibraryNotFoundError(ImportError):
    """libqd could not be found or loaded. ``tried`` lists every place that was looked at."""

    def __init__(self, message: str, tried: Sequence[str]) -> None:
        super().__init__(message)
        self.tried = list(tried)


# Shown as qd.LibraryNotFoundError, also in the traceback of a failed ``import qd`` (raised
# before qd/__init__.py could rename anything).
LibraryNotFoundError.__module__ = "qd"


def _package_candidates() -> List[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    found = glob.glob(os.path.join(here, "libqd.so*"))
    # libqd.so.0 (the soname) first, then libqd.so, then anything more specific.
    return sorted(found, key=lambda p: (os.path.basename(p) != "libqd.so.0",
                                        os.path.basename(p) != "libqd.so", p))


def _load() -> Tuple[ctypes.CDLL, str]:
    """Load libqd: $QD_LIBRARY, else next to this package, else the system loader."""
    tried: List[str] = []
    env = os.environ.get("QD_LIBRARY", "")
    if env:
        # An explicit choice is never second-guessed: if it fails, say so rather than load
        # some other libqd from elsewhere.
        try:
            return ctypes.CDLL(env), env
        except OSError as exc:
            raise LibraryNotFoundError(
                f"cannot load libqd from QD_LIBRARY={env!r}: {exc}. (Nothing else was tried: "
                "unset QD_LIBRARY to search next to the qd package and the system loader.)",
                [f"QD_LIBRARY={env}: {exc}"],
            ) from None
    tried.append("QD_LIBRARY: not set")
    pkg = _package_candidates()
    if not pkg:
        tried.append(f"next to the package: no {os.path.dirname(os.path.abspath(__file__))}"
                     f"{os.sep}libqd.so*")
    for path in pkg:
        try:
            return ctypes.CDLL(path), path
        except OSError as exc:
            tried.append(f"{path}: {exc}")
    names: List[str] = []
    found = ctypes.util.find_library("qd")
    if found:
        names.append(found)
    else:
        tried.append("ctypes.util.find_library('qd'): not found")
    names += [n for n in ("libqd.so.0", "libqd.so") if n not in names]
    for name in names:
        try:
            return ctypes.CDLL(name), name
        except OSError as exc:
            tried.append(f"system loader {name!r}: {exc}")
    raise LibraryNotFoundError(
        "cannot find libqd. Looked at:\n  - " + "\n  - ".join(tried) +
        "\nSet QD_LIBRARY to the full path of libqd.so (e.g. build/src/libqd.so), copy "
        "libqd.so.0 next to the qd package, or install it where the system loader finds it.",
        tried,
    )


def _declare(cdll: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in FUNCTIONS.items():
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            if SIGNATURES[name].experimental:
                continue  # a library built without it: the binding does not use it
            raise LibraryNotFoundError(
                f"{library_path} does not export {name}: it is older than the qd.h this "
                f"binding mirrors ({ABI_MAJOR}.{ABI_MINOR})", [library_path]) from None
        fn.restype = restype
        fn.argtypes = argtypes


lib, library_path = _load()
_declare(lib)
_pylib = ctypes.PyDLL(library_path)  # the same library; its calls keep the GIL (raw_gil)

_version = lib.qd_version()
if (_version >> 16) != ABI_MAJOR or ((_version >> 8) & 0xFF) < ABI_MINOR:
    raise LibraryNotFoundError(
        f"{library_path} is qd {_version >> 16}.{(_version >> 8) & 0xFF}.{_version & 0xFF}; "
        f"this binding needs {ABI_MAJOR}.{ABI_MINOR} or a later {ABI_MAJOR}.x",
        [library_path],
    )


def _raw_ctypes(name: str) -> "ctypes._CFuncPtr":
    restype, _ = FUNCTIONS[name]
    fn = lib[name]
    fn.restype = restype
    return fn


def raw_gil(name: str) -> object:
    """Like :func:`raw`, for the few calls that only touch qd's bookkeeping and never wait
    (``qd_stream_acquire``, ``_release``, ``_set_active``, ``_get_active``): with ctypes, a
    function object of a ``PyDLL``, which keeps the GIL across the call instead of releasing and
    re-taking it (a third of the cost of such a call). Safe because these calls are allowed
    inside qd's host callbacks, so no qd thread holds what they need while it waits for the
    GIL. cffi always releases the GIL: there this is :func:`raw`."""
    if CFFI:
        return getattr(C, name)
    restype, _ = FUNCTIONS[name]
    fn = _pylib[name]
    fn.restype = restype
    return fn


def raw(name: str) -> object:
    """The function the binding's hot paths call for ``name``.

    ctypes: a second function object without ``argtypes`` (restype still set). Call it only with
    ctypes instances of the exact C parameter types (``H(h)`` for handles, ``ref(...)`` for
    pointers, ``U32(n)`` for counts): ctypes then passes them without conversion.
    cffi: the cffi function; it takes Python ints for integers and handles (``H`` and ``U32`` are
    the identity) and cffi pointers (``ref(...)``).
    """
    if CFFI:
        return getattr(C, name)
    return _raw_ctypes(name)


# ----------------------------------------------------------------------------------------------
# The foreign function interface the binding calls through: cffi (ABI mode, declared from
# _api.CDEF) when cffi is importable, else ctypes. QD_PYTHON_FFI=ctypes|cffi forces one (cffi
# forced but unusable raises ImportError).
# Both call the same libqd: the cffi library is opened from library_path.
#
# What differs is hidden behind a few names every module uses:
#   C       the functions for ordinary calls: ctypes (with argtypes: ints convert) or cffi
#   H, U32  a handle / a uint32 count as the hot functions take it (c_uint64 / c_uint32 or int)
#   ref(o)  a pointer to a ctypes object (a struct mirror, c_uint64, an array of them): byref(o),
#           or a cffi pointer into the same memory (ffi.from_buffer, which keeps o alive)
#   NULL, ptr(addr), fnptr(ctypes_fn, "qd_host_fn"), cbytes(data), cstring(p)
# Structs are always the ctypes mirrors of _api; callbacks are always ctypes functions (cffi gets
# their address), so Python host kernels and callbacks see the same objects in both modes.
# ----------------------------------------------------------------------------------------------

def _open_cffi() -> Tuple[object, object, str]:
    """(ffi, lib, why not): the cffi library, or (None, None, the reason it is not used)."""
    mode = os.environ.get("QD_PYTHON_FFI", "").strip().lower()
    if mode not in ("", "auto", "cffi", "ctypes"):
        raise ImportError(f"QD_PYTHON_FFI={mode!r}: use 'cffi', 'ctypes' or leave it unset")
    if mode == "ctypes":
        return None, None, "QD_PYTHON_FFI=ctypes"
    try:
        import cffi
    except ImportError as exc:
        why = f"cffi is not importable ({exc})"
    else:
        ffi = cffi.FFI()
        ffi.cdef(CDEF)
        return ffi, ffi.dlopen(library_path), ""
    if mode == "cffi":
        raise ImportError(f"QD_PYTHON_FFI=cffi, but {why}")
    return None, None, why


ffi, _cffi_lib, why_not_cffi = _open_cffi()
#: True when the binding calls libqd through cffi; ``FFI`` is "cffi" or "ctypes".
CFFI = ffi is not None
FFI = "cffi" if CFFI else "ctypes"

if CFFI:
    C = _cffi_lib
    NULL = ffi.NULL
    H = U32 = U64 = U8 = int

    _REF_TYPES: Dict[type, str] = {c_uint64: "uint64_t *", c_uint32: "uint32_t *",
                                   ctypes.c_int32: "int32_t *", c_float: "float *",
                                   c_void_p: "void **", Arg: "qd_arg *", Task: "qd_task *"}
    _REF_TYPES.update({mirror: f"{name} *" for name, mirror in STRUCTS.items()})
    _from_buffer = ffi.from_buffer

    def ref(obj: object) -> object:
        """A cffi pointer to the ctypes object ``obj`` (kept alive by the pointer)."""
        t = type(obj)
        cdecl = _REF_TYPES.get(t)
        if cdecl is None:
            cdecl = _REF_TYPES[t._type_]  # type: ignore[attr-defined]  # an array
        return _from_buffer(cdecl, obj, require_writable=True)

    def ptr(address: Optional[int]) -> object:
        return ffi.cast("void *", address or 0)

    def fnptr(fn: object, cdecl: str) -> object:
        return ffi.cast(cdecl, ctypes.cast(fn, c_void_p).value)

    def cbytes(data: bytes) -> object:
        return ffi.from_buffer(data)

    def cstring(p: object) -> Optional[bytes]:
        return ffi.string(p) if p != ffi.NULL else None
else:
    C = lib
    NULL = None
    H = c_uint64
    U32 = c_uint32
    U64 = c_uint64
    U8 = c_uint8
    _byref = ctypes.byref
    _Array = ctypes.Array

    def ref(obj: object) -> object:
        """byref(obj); an array as itself (ctypes passes arrays as pointers)."""
        return obj if isinstance(obj, _Array) else _byref(obj)

    ptr = c_void_p

    def fnptr(fn: object, cdecl: str) -> object:
        return fn

    def cbytes(data: bytes) -> object:
        return c_char_p(data)

    def cstring(p: object) -> Optional[bytes]:
        return p  # type: ignore[return-value]  # restype c_char_p: already bytes or None


# ----------------------------------------------------------------------------------------------
# qd._speedups (qd/_speedups.c): the four bookkeeping calls (acquire, release, set and get the
# active stream) compiled, used in both FFI modes when present. A wheel built where a C compiler
# and Python's headers exist carries it; bindings/python/test builds one for the in-tree suite.
# QD_PYTHON_SPEEDUPS=0 turns it off; =PATH loads that file (an error if it cannot be loaded).
# ----------------------------------------------------------------------------------------------


def _load_speedups() -> Tuple[Optional[object], str]:
    """(module, why not): the bound qd._speedups module, or (None, the reason it is not used)."""
    setting = os.environ.get("QD_PYTHON_SPEEDUPS", "").strip()
    if setting == "0":
        return None, "QD_PYTHON_SPEEDUPS=0"
    if setting in ("", "1"):
        try:
            from . import _speedups as mod  # type: ignore[attr-defined]
        except ImportError as exc:
            if setting == "1":
                raise ImportError(f"QD_PYTHON_SPEEDUPS=1, but qd._speedups is not there ({exc})")
            return None, f"qd._speedups is not built ({exc})"
    else:
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.ExtensionFileLoader("qd._speedups", setting)
        spec = importlib.util.spec_from_file_location("qd._speedups", setting, loader=loader)
        if spec is None:
            raise ImportError(f"QD_PYTHON_SPEEDUPS={setting!r} is not a loadable module")
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
    mod.bind(*(address(name) for name in (  # type: ignore[attr-defined]
        "qd_stream_acquire", "qd_stream_release", "qd_stream_set_active",
        "qd_stream_get_active")))
    if hasattr(mod, "bind_launch"):  # Kernel.launch's packing and qd_launch (qd._kernel)
        mod.bind_launch(address("qd_launch"))  # type: ignore[attr-defined]
    # Stream.record's (bind_record) is bound by qd._stream, which defines what it makes.
    return mod, ""


def address(name: str) -> int:
    """The address of libqd's function ``name`` (what qd._speedups is bound to)."""
    return ctypes.cast(lib[name], c_void_p).value or 0


#: The compiled bookkeeping calls (qd/_speedups.c), or None; ``why_not_speedups`` says why.
SPEEDUPS, why_not_speedups = _load_speedups()


def status_name(status: int) -> str:
    """``qd_status_name``: the name of a status, e.g. ``"QD_ERROR_INVALID_HANDLE"``."""
    return (cstring(C.qd_status_name(status)) or b"").decode("ascii", "replace")


def backend_name(backend: int) -> str:
    """``qd_backend_name``: a backend's name, e.g. ``"cpu"``; ``"unknown"`` for other values."""
    return (cstring(C.qd_backend_name(backend)) or b"").decode("ascii", "replace")


def last_error_message() -> str:
    """``qd_last_error_message``: this thread's description of its last failed qd call."""
    msg = cstring(C.qd_last_error_message())
    return msg.decode("utf-8", "replace") if msg else ""
