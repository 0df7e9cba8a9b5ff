"""The C boundary: find and load libqd, mirror its structs, declare every function.

Nothing here knows anything but ``include/qd/qd.h``. The rest of the package calls the
functions declared in :data:`FUNCTIONS` (with ``argtypes`` and ``restype``) through :data:`lib`,
or, on hot paths, through :func:`raw` copies of the same symbols that have no ``argtypes``:
those are called only with arguments that are already ctypes instances of the exact C type, which
skips ctypes' per-argument conversion (about half the cost of a call).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_float,
    c_int32,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
    sizeof,
)
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = [
    "ABI_MAJOR",
    "ABI_MINOR",
    "Arg",
    "ContextDesc",
    "ContextStats",
    "DeviceInfo",
    "FUNCTIONS",
    "HostFn",
    "Hazard",
    "HazardFn",
    "HostKernelFn",
    "HostKernelInfo",
    "LaunchConfig",
    "LibraryNotFoundError",
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

#: The release of the header this binding mirrors (qd.h, QD_VERSION_MAJOR / _MINOR).
ABI_MAJOR = 0
ABI_MINOR = 3

# ----------------------------------------------------------------------------------------------
# Struct mirrors. Field for field as in qd.h; tests/test_api_description.py compares names,
# types, sizes and offsets with abi/qd-api.json, and tests/test_header.py with this host's C
# layout.
# ----------------------------------------------------------------------------------------------


class _Described(Structure):
    """A qd descriptor: ``struct_size`` is set to this struct's size on construction."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        if not self.struct_size:
            self.struct_size = sizeof(self)


class ContextDesc(_Described):
    """``qd_context_desc``: parameters of ``qd_context_create``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("backend", c_uint32),
        ("device", c_uint32),
        ("stream_pool_size", c_uint32),
        ("event_pool_size", c_uint32),
        ("cpu_worker_threads", c_uint32),
        ("flags", c_uint32),
        ("reserved", c_uint32),
    ]


class StreamDesc(_Described):
    """``qd_stream_desc``: parameters of ``qd_stream_create``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("flags", c_uint32),
        ("priority", c_int32),
        ("reserved", c_uint32),
    ]


class LaunchConfig(_Described):
    """``qd_launch_config``: grid, block and shared memory of a launch."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("grid", c_uint32 * 3),
        ("block", c_uint32 * 3),
        ("shared_mem_bytes", c_uint32),
    ]


class Arg(Structure):
    """``qd_arg``: one kernel argument, ``size`` bytes read from ``data``."""

    _fields_ = [("data", c_void_p), ("size", c_uint64)]


class Task(_Described):
    """``qd_task``: one task of ``qd_launch_parallel``."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("group", c_uint32),
        ("kernel", c_uint64),
        ("config", LaunchConfig),
        ("args", POINTER(Arg)),
        ("num_args", c_uint32),
        ("reserved", c_uint32),
    ]


class HostKernelInfo(Structure):
    """``qd_host_kernel_info``: what a CPU host kernel receives for one block."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("block_idx", c_uint32 * 3),
        ("grid_dim", c_uint32 * 3),
        ("block_dim", c_uint32 * 3),
        ("shared_mem_bytes", c_uint32),
        ("shared_mem", c_void_p),
    ]


class ContextStats(_Described):
    """``qd_context_stats``: statistics of one context."""

    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32)] + [
        (name, c_uint64)
        for name in (
            "live_streams",
            "live_events",
            "live_modules",
            "live_kernels",
            "stream_pool_capacity",
            "stream_pool_created",
            "stream_pool_leased",
            "stream_pool_hits",
            "stream_pool_misses",
            "event_pool_created",
            "event_pool_hits",
            "event_pool_misses",
            "live_allocations",
            "bytes_allocated",
            "host_bytes_allocated",
            "live_graphs",
            "hazards_reported",
        )
    ]


class DeviceInfo(_Described):
    """``qd_device_info``: what ``qd_device_get_info`` reports."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("backend", c_uint32),
        ("device", c_uint32),
        ("driver_version", c_uint32),
        ("compute_major", c_uint32),
        ("compute_minor", c_uint32),
        ("multiprocessors", c_uint32),
        ("reserved", c_uint32),
        ("total_memory", c_uint64),
        ("name", c_char * 128),
    ]


class Hazard(Structure):
    """``qd_hazard``: one hazard the validation mode reports (valid during the handler only)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", c_uint32),
        ("context", c_uint64),
        ("stream", c_uint64),
        ("other_stream", c_uint64),
        ("allocation", c_uint64),
        ("allocation_bytes", c_uint64),
        ("offset", c_uint64),
        ("operation", c_char_p),
        ("other_operation", c_char_p),
        ("message", c_char_p),
    ]


#: C struct name -> its ctypes mirror (every public struct of qd.h).
STRUCTS: Dict[str, type] = {
    "qd_context_desc": ContextDesc,
    "qd_stream_desc": StreamDesc,
    "qd_launch_config": LaunchConfig,
    "qd_arg": Arg,
    "qd_task": Task,
    "qd_host_kernel_info": HostKernelInfo,
    "qd_context_stats": ContextStats,
    "qd_device_info": DeviceInfo,
    "qd_hazard": Hazard,
}

#: ``qd_host_kernel_fn``: int32_t (*)(const qd_host_kernel_info *info, void *const *args).
HostKernelFn = CFUNCTYPE(c_int32, POINTER(HostKernelInfo), POINTER(c_void_p))
#: ``qd_host_fn``: void (*)(void *user_data).
HostFn = CFUNCTYPE(None, c_void_p)
HostKernelFn.__doc__ = (
    "qd_host_kernel_fn: int32_t (*)(const qd_host_kernel_info *info, void *const *args). "
    "Wrap a Python function with it (as a decorator) to make a raw ctypes host kernel.")
HostFn.__doc__ = "qd_host_fn: void (*)(void *user_data), a host callback."
#: ``qd_hazard_fn``: void (*)(const qd_hazard *hazard, void *user_data).
HazardFn = CFUNCTYPE(None, POINTER(Hazard), c_void_p)
HazardFn.__doc__ = "qd_hazard_fn: void (*)(const qd_hazard *hazard, void *user_data)."

# ----------------------------------------------------------------------------------------------
# Every function of qd.h: name -> (restype, argtypes). Handles are c_uint64, qd_status c_int32.
# tests/test_api_description.py fails when abi/qd-api.json (the description of qd.h) has a
# function that is missing here or whose argument count or types differ.
# ----------------------------------------------------------------------------------------------

_status = c_int32
_handle = c_uint64
_out_handle = POINTER(c_uint64)
_backend = c_int32  # enum qd_backend (int-sized)

FUNCTIONS: Dict[str, Tuple[object, List[object]]] = {
    # status, errors, version
    "qd_status_name": (c_char_p, [_status]),
    "qd_last_error_message": (c_char_p, []),
    "qd_version": (c_uint32, []),
    # devices
    "qd_backend_name": (c_char_p, [_backend]),
    "qd_device_count": (_status, [_backend, POINTER(c_uint32)]),
    "qd_device_get_info": (_status, [_backend, c_uint32, POINTER(DeviceInfo)]),
    # contexts
    "qd_context_create": (_status, [POINTER(ContextDesc), _out_handle]),
    "qd_context_destroy": (_status, [_handle]),
    "qd_context_synchronize": (_status, [_handle]),
    "qd_context_default_stream": (_status, [_handle, _out_handle]),
    "qd_context_get_stats": (_status, [_handle, POINTER(ContextStats)]),
    # streams
    "qd_stream_create": (_status, [_handle, POINTER(StreamDesc), _out_handle]),
    "qd_stream_destroy": (_status, [_handle]),
    "qd_stream_synchronize": (_status, [_handle]),
    "qd_stream_query": (_status, [_handle]),
    "qd_stream_wait_event": (_status, [_handle, _handle]),
    "qd_stream_acquire": (_status, [_handle, _out_handle]),
    "qd_stream_release": (_status, [_handle]),
    "qd_stream_fork": (_status, [_handle, c_uint32, _out_handle]),
    "qd_stream_join": (_status, [_handle, _out_handle, c_uint32]),
    "qd_stream_set_active": (_status, [_handle, _handle, _out_handle]),
    "qd_stream_get_active": (_status, [_handle, _out_handle]),
    "qd_stream_get_context": (_status, [_handle, _out_handle]),
    "qd_stream_get_priority": (_status, [_handle, POINTER(c_int32)]),
    "qd_stream_priority_range": (_status, [_handle, POINTER(c_int32), POINTER(c_int32)]),
    "qd_stream_native_handle": (_status, [_handle, POINTER(c_uint64)]),
    "qd_stream_import": (_status, [_handle, c_uint64, _out_handle]),
    # events
    "qd_event_create": (_status, [_handle, c_uint32, _out_handle]),
    "qd_event_destroy": (_status, [_handle]),
    "qd_event_record": (_status, [_handle, _handle]),
    "qd_event_query": (_status, [_handle]),
    "qd_event_synchronize": (_status, [_handle]),
    "qd_event_elapsed_ms": (_status, [_handle, _handle, POINTER(c_float)]),
    # modules and kernels
    "qd_module_load": (_status, [_handle, c_void_p, c_uint64, _out_handle]),
    "qd_module_unload": (_status, [_handle]),
    "qd_kernel_get": (_status, [_handle, c_char_p, _out_handle]),
    "qd_kernel_from_host_fn": (_status, [_handle, HostKernelFn, c_char_p, _out_handle]),
    "qd_kernel_destroy": (_status, [_handle]),
    # launch
    "qd_launch": (_status, [_handle, _handle, POINTER(LaunchConfig), POINTER(Arg), c_uint32]),
    "qd_launch_parallel": (_status, [_handle, POINTER(Task), c_uint32]),
    "qd_launch_host_fn": (_status, [_handle, HostFn, c_void_p]),
    # memory
    "qd_mem_alloc_async": (_status, [_handle, c_uint64, POINTER(c_uint64)]),
    "qd_mem_free_async": (_status, [_handle, c_uint64]),
    "qd_memcpy_async": (_status, [_handle, c_uint64, c_uint64, c_uint64]),
    "qd_memset_async": (_status, [_handle, c_uint64, c_uint8, c_uint64]),
    "qd_host_alloc": (_status, [_handle, c_uint64, POINTER(c_void_p)]),
    "qd_host_free": (_status, [_handle, c_void_p]),
    # graphs (since 0.2)
    "qd_stream_begin_capture": (_status, [_handle]),
    "qd_stream_end_capture": (_status, [_handle, _out_handle]),
    "qd_graph_launch": (_status, [_handle, _handle]),
    "qd_graph_update": (_status, [_handle, _handle]),
    "qd_graph_destroy": (_status, [_handle]),
    # timeline trace (since 0.2)
    "qd_trace_start": (_status, [_handle, c_char_p]),
    "qd_trace_stop": (_status, [_handle]),
    "qd_trace_flush": (_status, [_handle]),
    # several devices (since 0.2)
    "qd_context_can_access_peer": (_status, [_handle, _handle, POINTER(c_uint32)]),
    "qd_context_enable_peer_access": (_status, [_handle, _handle]),
    "qd_memcpy_peer_async": (_status, [_handle, c_uint64, _handle, c_uint64, _handle, c_uint64]),
    # validation (since 0.2)
    "qd_context_set_hazard_handler": (_status, [_handle, HazardFn, c_void_p]),
    "qd_kernel_set_param_access": (_status, [_handle, c_uint32, c_uint32]),
}

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
# abi/qd-api.json, which the wheel carries as qd/qd-api.json) when cffi is importable, else
# ctypes. QD_PYTHON_FFI=ctypes|cffi forces one (cffi forced but unusable raises ImportError).
# Both call the same libqd: the cffi library is opened from library_path.
#
# What differs is hidden behind a few names every module uses:
#   C       the functions for ordinary calls: ctypes (with argtypes: ints convert) or cffi
#   H, U32  a handle / a uint32 count as the hot functions take it (c_uint64 / c_uint32 or int)
#   ref(o)  a pointer to a ctypes object (a struct mirror, c_uint64, an array of them): byref(o),
#           or a cffi pointer into the same memory (ffi.from_buffer, which keeps o alive)
#   NULL, ptr(addr), fnptr(ctypes_fn, "qd_host_fn"), cbytes(data), cstring(p)
# Structs are always the ctypes mirrors above; callbacks are always ctypes functions (cffi gets
# their address), so Python host kernels and callbacks see the same objects in both modes.
# ----------------------------------------------------------------------------------------------

_C_SCALARS = {"uint64_t", "uint32_t", "uint8_t", "int32_t", "float", "char", "void"}


def declarations(api: Dict[str, object]) -> str:
    """cffi ``cdef`` text of qd.h, generated from its machine-readable description
    (abi/qd-api.json): handles, typedefs, enums, structs, function pointers and functions."""
    out: List[str] = []
    for h in api["handles"]:  # type: ignore[index]
        out.append(f"typedef {h['type']} {h['name']};")
    for t in api["typedefs"]:  # type: ignore[index]
        out.append(f"typedef {t['type']} {t['name']};")
    for e in api["enums"]:  # type: ignore[index]
        values = ", ".join(f"{v['name']} = {v['value']}" for v in e["values"])
        if e["c_name"].startswith("enum "):
            out.append(f"{e['c_name']} {{ {values} }};")
        else:
            out.append(f"typedef enum {{ {values} }} {e['name']};")
    for st in api["structs"]:  # type: ignore[index]
        out.append(f"typedef struct {st['name']} {st['name']};")
    for fp in api["function_pointers"]:  # type: ignore[index]
        params = ", ".join(f"{p['type']} {p['name']}" for p in fp["params"]) or "void"
        out.append(f"typedef {fp['return']} (*{fp['name']})({params});")
    for st in api["structs"]:  # type: ignore[index]
        fields = []
        for f in st["fields"]:
            dim = f"[{f['array_length']}]" if f.get("array_length") else ""
            fields.append(f"    {f['type']} {f['name']}{dim};")
        out.append(f"struct {st['name']} {{\n" + "\n".join(fields) + "\n};")
    for fn in api["functions"]:  # type: ignore[index]
        params = ", ".join(f"{p['type']} {p['name']}" for p in fn["params"]) or "void"
        out.append(f"{fn['return']} {fn['name']}({params});")
    return "\n".join(out) + "\n"


def _api_description_path() -> Optional[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "qd-api.json"),  # an installed package (the wheel's copy)
                 os.path.join(here, "..", "..", "..", "abi", "qd-api.json")):  # a checkout
        if os.path.isfile(path):
            return os.path.normpath(path)
    return None


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
        path = _api_description_path()
        if path is None:
            why = "no qd-api.json next to the package or in the checkout's abi/"
        else:
            import json
            with open(path, encoding="utf-8") as f:
                api = json.load(f)
            ffi = cffi.FFI()
            ffi.cdef(declarations(api))
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
    address = ctypes.cast
    mod.bind(*(address(lib[name], c_void_p).value for name in (  # type: ignore[attr-defined]
        "qd_stream_acquire", "qd_stream_release", "qd_stream_set_active",
        "qd_stream_get_active")))
    return mod, ""


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
