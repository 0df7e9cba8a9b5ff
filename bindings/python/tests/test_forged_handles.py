"""Every function of qd.h refuses a forged handle in every position, driven by the generated
description (qd._api.SIGNATURES): a function added to qd.h is fuzzed here with no edit.

For each function and each place a handle goes (a handle parameter, an element of a handle
array, a handle field of a struct it takes, like ``qd_task.kernel``), the function is called
through the declared functions of the FFI mode in use (the suite runs under
``QD_PYTHON_FFI=ctypes`` and ``=cffi``) with a forged handle there (0, ~0, a random value, a
destroyed handle of that kind, a live handle of another kind) and a valid value everywhere else,
made from each parameter's role (a live context's objects, a host allocation, a device address,
an out slot, a no-op callback). The call must return QD_ERROR_INVALID_HANDLE, a status qd.h lists
for it, and leave the context as it was (its statistics, its objects).
"""

from __future__ import annotations

import ctypes
import random
from ctypes import byref, c_uint64
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import qd
from qd import _api, _lib

SIGNATURES = _api.SIGNATURES
INVALID_HANDLE = qd.Status.ERROR_INVALID_HANDLE

#: A place a handle goes: (parameter index, element index in an array or None, struct field
#: path or ()), with the handle type it takes.
Place = Tuple[int, Optional[int], Tuple[str, ...]]


def _handle_fields(struct: str,
                   path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], str]]:
    """(field path, handle type) of every handle field of a struct, nested structs included."""
    for field, c_type in _api.FIELD_TYPES[struct].items():
        if c_type in _api.HANDLES:
            yield path + (field,), c_type
        elif c_type in _api.FIELD_TYPES:
            yield from _handle_fields(c_type, path + (field,))


def _places(name: str) -> List[Tuple[Place, str]]:
    out: List[Tuple[Place, str]] = []
    for i, p in enumerate(SIGNATURES[name].params):
        if p.role == "handle":
            out.append(((i, None, ()), p.of))
        elif p.role == "in_array" and p.handle:
            out.append(((i, 0, ()), p.of))
        elif p.role in ("in_array", "in_struct", "inout_struct") and p.of in _api.FIELD_TYPES:
            element = 0 if p.role == "in_array" else None
            out += [((i, element, path), h) for path, h in _handle_fields(p.of)]
    return out


CASES = [(name, place, handle_type) for name in SIGNATURES for place, handle_type in _places(name)]


def _case_id(case: Tuple[str, Place, str]) -> str:
    name, (i, element, path), _ = case
    where = SIGNATURES[name].params[i].name
    if element is not None:
        where += f"[{element}]"
    return f"{name}:{'.'.join((where,) + path)}"


# ---------------------------------------------------------------------------------------------
# A live context with one or two objects of every handle type, made through the ctypes
# declarations (qd._lib.lib), whatever the FFI mode.
# ---------------------------------------------------------------------------------------------

_L = _lib.lib


def _check(status: int, what: str) -> None:
    assert status == 0, f"{what}: {qd.status_name(status)}: {_lib.last_error_message()}"


def _new(fn: str, *args: Any) -> int:
    out = c_uint64()
    _check(getattr(_L, fn)(*args, byref(out)), fn)
    return out.value


class World:
    """A CPU context and its objects: ``live[t]``, two live handles of each handle type t;
    ``dead[t]``, a handle of type t already destroyed."""

    def __init__(self, module_path: str) -> None:
        desc = _api.ContextDesc(backend=_api.QD_BACKEND_CPU)
        self.ctx = _new("qd_context_create", byref(desc))
        self.path = module_path.encode()
        self.live: Dict[str, List[int]] = {}
        self.dead: Dict[str, int] = {}
        for t in _api.HANDLES:
            if t not in MAKERS:
                raise AssertionError(f"a handle type this test cannot make yet: {t} (add it to "
                                     "MAKERS, with the function that destroys it)")
            make, destroy = MAKERS[t]
            first = self.ctx if t == "qd_context" else make(self)  # the world's own context
            self.live[t] = [first, make(self)]
            gone = make(self)
            _check(getattr(_L, destroy)(gone), destroy)
            self.dead[t] = gone
        host = ctypes.c_void_p()
        _check(_L.qd_host_alloc(self.ctx, 64, byref(host)), "qd_host_alloc")
        self.host = host.value
        stream = self.live["qd_stream"][0]
        address = c_uint64()
        _check(_L.qd_mem_alloc_async(stream, 64, byref(address)), "qd_mem_alloc_async")
        _check(_L.qd_stream_synchronize(stream), "qd_stream_synchronize")
        self.address = address.value

    def stats(self) -> Dict[str, int]:
        s = _api.ContextStats()
        _check(_L.qd_context_get_stats(self.ctx, byref(s)), "qd_context_get_stats")
        return {f: getattr(s, f) for f, _ in _api.ContextStats._fields_}

    def close(self) -> None:
        _check(_L.qd_host_free(self.ctx, self.host), "qd_host_free")
        for ctx in self.live["qd_context"][1:] + [self.ctx]:
            _check(_L.qd_context_destroy(ctx), "qd_context_destroy")


def _make_graph(w: World) -> int:
    stream = _new("qd_stream_create", w.ctx, None)
    _check(_L.qd_stream_begin_capture(stream), "qd_stream_begin_capture")
    graph = _new("qd_stream_end_capture", stream)
    _check(_L.qd_stream_destroy(stream), "qd_stream_destroy")
    return graph


#: Handle type -> (make one in the world, the function that destroys one).
MAKERS: Dict[str, Tuple[Callable[[World], int], str]] = {
    "qd_context": (lambda w: _new("qd_context_create", byref(_api.ContextDesc(
        backend=_api.QD_BACKEND_CPU))), "qd_context_destroy"),
    "qd_stream": (lambda w: _new("qd_stream_create", w.ctx, None), "qd_stream_destroy"),
    "qd_event": (lambda w: _new("qd_event_create", w.ctx, 0), "qd_event_destroy"),
    "qd_module": (lambda w: _new("qd_module_load", w.ctx, w.path, len(w.path)),
                  "qd_module_unload"),
    "qd_kernel": (lambda w: _new("qd_kernel_get", w.live["qd_module"][0], b"noop"),
                  "qd_kernel_destroy"),
    "qd_graph": (_make_graph, "qd_graph_destroy"),
    "qd_timeline": (lambda w: _new("qd_timeline_create", w.ctx, 0), "qd_timeline_destroy"),
}


@pytest.fixture(scope="module")
def world(cpu_module_path: str) -> Iterator[World]:
    w = World(cpu_module_path)
    try:
        yield w
    finally:
        w.close()


# ---------------------------------------------------------------------------------------------
# Valid arguments from each parameter's role, with a forged handle in one place.
# ---------------------------------------------------------------------------------------------


def _struct(c_name: str, w: World, forge: Tuple[str, ...], value: int) -> Any:
    """A valid instance of a struct's mirror: live handles, ones in integer arrays (grid and
    block), nested structs likewise, NULL pointers; ``value`` at the field path ``forge``."""
    obj = _api.STRUCTS[c_name]()
    if c_name == "qd_launch_attr":
        # No INIT macro, kind 0 is not a kind, and a field the kind does not use must be 0:
        # the kind whose one field is a handle (event).
        obj.kind = _api.QD_LAUNCH_ATTR_COMPLETION_EVENT
        obj.event = value if forge[:1] == ("event",) else w.live["qd_event"][0]
        return obj
    for field, ctype in obj._fields_:
        c_type = _api.FIELD_TYPES[c_name][field]
        here = forge[:1] == (field,)
        if field in getattr(obj, "_init_values_", {}):
            continue  # as the INIT macro sets it (the mirror's constructor did)
        if c_type in _api.HANDLES:
            setattr(obj, field, value if here else w.live[c_type][0])
        elif c_type in _api.FIELD_TYPES:
            setattr(obj, field, _struct(c_type, w, forge[1:] if here else (), value))
        elif isinstance(ctype, type) and issubclass(ctype, ctypes.Array):
            setattr(obj, field, ctype(*([1] * ctype._length_)))
    return obj


def _args(name: str, w: World, place: Place, value: int) -> Tuple[List[Any], List[Any]]:
    """(arguments, objects to keep alive) for one call of ``name``."""
    sig = SIGNATURES[name]
    argtypes = _api.FUNCTIONS[name][1]
    index, element, path = place
    keep: List[Any] = []
    lengths: Dict[str, int] = {}
    args: List[Any] = [None] * len(sig.params)
    for i, (p, argtype) in enumerate(zip(sig.params, argtypes)):
        here = i == index
        if p.role == "handle":
            args[i] = value if here else w.live[p.of][0]
        elif p.role == "out":
            slot = argtype._type_()
            keep.append(slot)
            args[i] = _lib.ref(slot)
        elif p.role == "out_array":
            arr = (argtype._type_ * 2)()
            keep.append(arr)
            lengths[p.name] = 2
            args[i] = _lib.ref(arr)
        elif p.role == "in_array":
            if p.handle:
                # One element: the second live object of the type (not the one other
                # parameters use, so a stream is never joined to itself).
                items = [value if here else w.live[p.of][1]]
                arr = (argtype._type_ * 1)(*items)
            elif p.of not in _api.FIELD_TYPES:
                # Scalars (a split's counts): one element of 1.
                arr = (argtype._type_ * 1)(1)
            elif not any(_handle_fields(p.of)):
                # No handle inside (kernel arguments): the empty array is the valid one.
                lengths[p.name] = 0
                args[i] = _lib.NULL
                continue
            else:
                arr = (argtype._type_ * 1)(_struct(p.of, w, path if here else (), value))
            keep.append(arr)
            lengths[p.name] = 1
            args[i] = _lib.ref(arr)
        elif p.role in ("in_struct", "inout_struct"):
            if here or not p.optional or p.role == "inout_struct":
                obj = _struct(p.of, w, path if here else (), value)
                keep.append(obj)
                args[i] = _lib.ref(obj)
            else:
                args[i] = _lib.NULL
        elif p.role == "string":
            args[i] = b"qd_forged_handle_test"
        elif p.role == "bytes":
            data = bytes(16)
            keep.append(data)
            lengths[p.name] = len(data)
            args[i] = _lib.cbytes(data)
        elif p.role == "callback":
            restype = argtype._restype_
            fn = argtype((lambda *a: 0) if restype is not None else (lambda *a: None))
            keep.append(fn)
            args[i] = _lib.fnptr(fn, p.of)
        elif p.role == "user_data":
            args[i] = _lib.NULL
        elif p.role == "host_pointer":
            args[i] = _lib.ptr(w.host)
        elif p.role == "address":
            args[i] = w.address
        elif p.role == "value":
            args[i] = 1.0 if argtype in (ctypes.c_float, ctypes.c_double) else 1
        elif p.role not in ("count", "size"):
            raise AssertionError(f"{name}: parameter {p.name} has a role this test does not "
                                 f"know: {p.role!r} (teach _args)")
    for i, p in enumerate(sig.params):  # counts and sizes: the length of what they count
        if p.role in ("count", "size"):
            args[i] = lengths[p.of]
    return args, keep


def _forgeries(w: World, handle_type: str) -> List[Tuple[str, int]]:
    rng = random.Random(f"qd-forged-{handle_type}")
    live = {h for hs in w.live.values() for h in hs}
    forged = rng.getrandbits(64)
    while forged in live or forged == 0:
        forged = rng.getrandbits(64)
    other = next(t for t in _api.HANDLES if t != handle_type)
    return [
        ("0", 0),
        ("~0", (1 << 64) - 1),
        (f"random {forged:#x}", forged),
        (f"a destroyed {handle_type}", w.dead[handle_type]),
        (f"a live {other}", w.live[other][0]),
    ]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_forged_handle_is_refused_and_changes_nothing(world: World,
                                                      case: Tuple[str, Place, str]) -> None:
    name, place, handle_type = case
    sig = SIGNATURES[name]
    assert sig.statuses is not None and "QD_ERROR_INVALID_HANDLE" in sig.statuses, \
        f"{name} takes a {handle_type} but qd.h lists no QD_ERROR_INVALID_HANDLE for it"
    fn = getattr(_lib.C, name)
    for what, value in _forgeries(world, handle_type):
        before = world.stats()
        args, keep = _args(name, world, place, value)
        status = fn(*args)
        del keep
        said = f" ({_lib.last_error_message()})" if status < 0 else ""
        assert status == INVALID_HANDLE, (f"{_case_id(case)} = {what} ({qd.FFI}): "
                                          f"{qd.status_name(status)}{said}, not "
                                          "QD_ERROR_INVALID_HANDLE")
        assert world.stats() == before, f"{_case_id(case)} = {what}: the context changed"


def test_every_function_that_takes_a_handle_is_fuzzed() -> None:
    """Every handle type reaches the fuzz cases, and so does every function with a handle
    parameter (the description's roles, not a list kept here)."""
    fuzzed = {name for name, _, _ in CASES}
    by_value = {name for name, sig in SIGNATURES.items()
                if any(p.role == "handle" for p in sig.params)}
    assert by_value <= fuzzed
    assert {t for _, _, t in CASES} == set(_api.HANDLES)
    assert any(path for _, (_, _, path), _ in CASES), "no handle field of a struct is fuzzed"
    assert any(element is not None and not path for _, (_, element, path), _ in CASES), \
        "no element of a handle array is fuzzed"
