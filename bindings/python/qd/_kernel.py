"""Module, Kernel, Launcher, Task: loading code, packing arguments and launching it."""

from __future__ import annotations

import ctypes
import operator
import struct
from ctypes import (
    POINTER,
    byref,
    c_double,
    c_uint32,
    c_uint64,
    sizeof,
)
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _api, _lib
from ._lib import C as _C, H as _H, NULL as _NULL, U32 as _U32, ref as _ref
from ._errors import (
    ArgumentRangeError,
    ArgumentTypeError,
    HandleTypeError,
    InvalidArgumentError,
    ObjectClosedError,
    WrongContextError,
)
from ._base import (
    MAX_ARGS, _C_U32, _C_ZERO, _U64_MAX, _err, _f_kernel_destroy, _f_launch, _f_launch_ex,
    _f_launch_parallel, _f_module_unload, _u32,
)
from ._callbacks import _enqueue, _enqueue_status
from ._stream import Event, Stream, _as_stream, _ContextChild, _stream_c, _with_context
from ._memory import DeviceBuffer, HostBuffer

if TYPE_CHECKING:
    from ._context import Context


# ----------------------------------------------------------------------------------------------
# Modules and kernels
# ----------------------------------------------------------------------------------------------


class Module(_ContextChild):
    """A loaded module (``Context.load_module``). ``close()`` unloads it, which closes every
    Kernel taken from it; queued work keeps the code alive until it completes."""

    __slots__ = ("_h", "_c", "_key", "_ctx", "_kernels", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("load modules with Context.load_module()")

    def __repr__(self) -> str:
        return f"<qd.Module {'closed' if self.closed else hex(self._h)}>"

    def _closed_error(self) -> ObjectClosedError:
        how = "closed with its qd.Context" if _with_context(self) else "unloaded"
        return ObjectClosedError(f"this qd.Module (handle {self._key:#x}) was {how}")

    def get_kernel(self, name: str) -> "Kernel":
        """Find a kernel by name (``qd_kernel_get``).

        Raises:
            NotFoundError: the module has no kernel of that name.
        """
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if isinstance(name, str):
            raw_name = name.encode("utf-8")
        elif isinstance(name, bytes):
            raw_name = name
        else:
            raise ArgumentTypeError(f"name must be a str, not {type(name).__name__}")
        out = c_uint64()
        status = _C.qd_kernel_get(self._h, raw_name, _ref(out))
        if status:
            raise _err(status, self._ctx)
        k = _new_kernel(self._ctx, out.value, raw_name.decode("utf-8", "replace"), self)
        self._kernels.add(k)
        return k

    _destroy = staticmethod(_f_module_unload)

    def close(self) -> None:
        """Unload the module; its kernels become closed. Idempotent."""
        self._close()

    def _after_close(self) -> None:
        for k in list(self._kernels):
            k._h = 0
            k._c = _C_ZERO

    unload = close


def _new_kernel(ctx: Context, handle: int, name: str, module: Optional[Module]) -> "Kernel":
    k = object.__new__(Kernel)
    k._h = k._key = handle
    k._c = _H(handle)
    k._ctx = ctx
    k._module = module
    k._name = name
    k._configs = {}
    k._fast = k._prev = _no_fast
    k._recent = []
    k._specs = []
    return k


def kernel_arg(args: Any, index: int, ctype: Any = c_uint64) -> Any:
    """In a Python host kernel: the value of argument ``index`` read as ``ctype``."""
    return ctype.from_address(args[index]).value


#: qd_param_access, by the names Kernel.set_param_access takes.
PARAM_ACCESS = {name[len("QD_PARAM_"):].lower(): value for name, value in vars(_api).items()
                if name.startswith("QD_PARAM_")}


class Kernel(_ContextChild):
    """A kernel: from ``Module.get_kernel`` or ``Kernel.from_host_fn`` (CPU only).

    Launch it with ``kernel.launch(*args, grid=, block=, stream=)``, or pre-pack a launch with
    ``kernel.prepare(*args, grid=, block=)`` and call the Launcher with ``stream=``.

    Kernel arguments (each becomes one qd_arg, copied by qd before the launch returns):

    ============================================  ==========================================
    Python value                                  passed as
    ============================================  ==========================================
    ``int`` (and objects with ``__index__``)      ``uint64_t``; must be 0..2**64-1
    ``float``                                     ``double``
    ``DeviceBuffer`` / ``HostBuffer``             its address, ``uint64_t``
    a ctypes instance (``c_uint32(5)``,           its bytes, ``sizeof`` of it: use these for
    ``c_float(1.0)``, a Structure, an array)      32-bit, signed, float and by-value structs
    ``bool``, ``None``, str, bytes, others        rejected (ArgumentTypeError)
    ============================================  ==========================================
    """

    __slots__ = ("_h", "_c", "_key", "_ctx", "_module", "_name", "_configs", "_fast", "_prev",
                 "_recent", "_specs", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("get kernels with Module.get_kernel() or Kernel.from_host_fn()")

    @classmethod
    def from_host_fn(cls, ctx: Context, fn: Callable[..., Optional[int]],
                     name: Optional[str] = None) -> "Kernel":
        """Make a CPU kernel from a host function (``qd_kernel_from_host_fn``).

        ``fn`` is a ``qd.HostKernelFn`` (a ctypes CFUNCTYPE) or a Python callable
        ``fn(info: qd.HostKernelInfo, args) -> None | int`` run once per block on a worker
        thread (it takes the GIL). Read argument ``i`` with ``qd.kernel_arg(args, i, ctype)``.
        Returning non-zero, or raising, is a device fault: the context becomes lost, and the
        exception is the ``__cause__`` of the DeviceLostError that follows. The callable stays
        alive until the context is destroyed.

        Raises:
            NotSupportedError: ``ctx`` is not a CPU context.
        """
        from ._context import Context  # (imported here: _context imports this module)

        if not isinstance(ctx, Context):
            raise HandleTypeError(f"ctx must be a qd.Context, not {type(ctx).__name__}")
        ctx._check_open()
        if isinstance(fn, _lib.HostKernelFn):
            cfn = fn
        elif callable(fn):
            errors = ctx._cb_errors

            def host_kernel(info: Any, args: Any) -> int:
                try:
                    result = fn(info.contents, args)
                    return 0 if not result else 1
                except BaseException as exc:
                    try:
                        errors.append(exc)
                    except BaseException:
                        pass
                    return 1

            cfn = _lib.HostKernelFn(host_kernel)
        else:
            raise ArgumentTypeError(f"fn must be callable, not {type(fn).__name__}")
        if name is None:
            name = getattr(fn, "__name__", None)
        raw_name = name.encode("utf-8") if isinstance(name, str) else None
        out = c_uint64()
        status = _C.qd_kernel_from_host_fn(ctx._h, _lib.fnptr(cfn, "qd_host_kernel_fn"),
                                           _NULL if raw_name is None else raw_name, _ref(out))
        if status:
            raise _err(status, ctx)
        ctx._keep.append(cfn)
        return _new_kernel(ctx, out.value, name or "", None)

    @property
    def name(self) -> str:
        """The kernel name (the symbol, or the host function's name)."""
        return self._name

    def __repr__(self) -> str:
        return f"<qd.Kernel {self._name!r} {'closed' if self.closed else hex(self._h)}>"

    def _closed_error(self) -> ObjectClosedError:
        if _with_context(self):
            return ObjectClosedError(f"this qd.Kernel {self._name!r} (handle {self._key:#x}) "
                                     "was closed with its qd.Context")
        return ObjectClosedError(
            f"this qd.Kernel {self._name!r} (handle {self._key:#x}) was closed or its module "
            "was unloaded")

    _destroy = staticmethod(_f_kernel_destroy)

    def close(self) -> None:
        """Destroy the kernel handle; queued work with it still runs. Idempotent."""
        self._close()

    def set_param_access(self, index: int, access: str) -> None:
        """Declare how the kernel uses the memory its parameter ``index`` points to, for the
        validation mode (``qd_kernel_set_param_access``): ``"read"``, ``"write"``,
        ``"read_write"`` (the default), ``"ignore"`` or ``"partitioned"`` (each launch touches
        only its own part, chosen by its other arguments). With ``"read"``, launches on several
        streams that read the same buffer are not reported as races.

        Raises:
            InvalidArgumentError: index >= 64, or an unknown access.
        """
        if access not in PARAM_ACCESS:
            raise ArgumentTypeError(
                f"access must be one of {sorted(PARAM_ACCESS)}, not {access!r}")
        if self.closed:
            raise self._closed_error()
        status = _C.qd_kernel_set_param_access(
            self._h, _u32(index, "index"), PARAM_ACCESS[access])
        if status:
            raise _err(status, self._ctx)

    def _config(self, grid: Any, block: Any, shared_mem: Any) -> Tuple[Any, int]:
        """(``byref`` of the launch config, its address), cached per (grid, block,
        shared_mem). The reference keeps the config alive."""
        # Cache only exact ints and tuples of ints: 1.0 == 1 must not hit a cached config.
        if type(grid) is int and type(block) is int and type(shared_mem) is int:
            key: Any = (grid, block, shared_mem)
        elif _cacheable(grid) and _cacheable(block) and type(shared_mem) is int:
            key = (grid, block, shared_mem)
        else:
            cfg = _make_config(grid, block, shared_mem)
            return _ref(cfg), ctypes.addressof(cfg)
        pair = self._configs.get(key)
        if pair is None:
            cfg = _make_config(grid, block, shared_mem)
            pair = (_ref(cfg), ctypes.addressof(cfg))
            if len(self._configs) < 64:
                self._configs[key] = pair
        return pair

    def launch(self, *args: Any, grid: Union[int, Sequence[int]] = 1,
               block: Union[int, Sequence[int]] = 1, shared_mem: int = 0,
               stream: Stream, cluster: Optional[Union[int, Sequence[int]]] = None,
               programmatic: bool = False, priority: Optional[int] = None,
               completion_event: Optional[Event] = None) -> None:
        """Queue the kernel on ``stream`` (``qd_launch``). ``stream`` is required.

        Args:
            *args: kernel arguments (see the class docstring for the mapping).
            grid, block: an int or a sequence of 1 to 3 ints (x, y, z); each at least 1.
            shared_mem: bytes of shared memory per block.
            cluster, programmatic, priority, completion_event: launch attributes
                (``qd_launch_ex``; qd.h, "Launch attributes"): blocks per thread-block cluster
                (1 to 3 ints, each dividing the grid); programmatic dependent launch; this
                launch's priority (lower is more urgent); an Event of the stream's context that
                the launch records, complete once every block has started. Any of them given
                makes the call ``qd_launch_ex``; NotSupportedError where the backend or device
                cannot honour one (the message names it).
        """
        if type(stream) is not Stream or not stream._h or not stream._ctx._h:
            stream = _as_stream(stream, self._ctx)
        sc = stream._c
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        if (cluster is not None or programmatic or priority is not None
                or completion_event is not None):
            attrs = _LaunchAttrs(cluster, programmatic, priority, completion_event)
            arr, keep = _pack_args(args, self._ctx) if args else (None, [])
            cfg = _make_config(grid, block, shared_mem)
            status = _f_launch_ex(sc, self._c, _ref(cfg), attrs.ref, attrs.count,
                                  _ref(arr) if arr is not None else _NULL, _U32(len(keep)))
            del keep
            if status:
                raise _err(status, self._ctx)
            return
        if grid is _ONE and block is _ONE and shared_mem is _ZERO:  # the defaults, as passed
            cfg, addr = _DEFAULT_CONFIG, _DEFAULT_ADDRESS
        else:
            cfg, addr = self._config(grid, block, shared_mem)
        if not args:
            status = _f_launch(sc, self._c, cfg, _NULL, _C_U32[0])
        elif _sp_launch is not None:
            # qd._speedups: the signatures of this kernel's recent launches that it can pack
            # (_Layout.spec) are checked, packed and launched in C; None: none fits.
            specs = self._specs
            if specs:
                status = _sp_launch(stream._h, self._h, addr, self._ctx, args, specs)
                if status is None:
                    status = self._launch_py(sc, cfg, args)
            else:  # none learned yet, or only signatures it cannot pack: the Python path
                status = self._launch_py(sc, cfg, args)
        else:
            # The fast path: the launch function made for the argument types of this kernel's
            # last launch (see _Layout); _MISS when these arguments do not fit it. Then the one
            # of the signature before it, tried here too, so that two signatures in turn cost
            # one failed type check more than one signature, and no further call.
            fast = self._fast
            status = fast(sc, self._c, cfg, self._ctx, args)
            if status is _MISS:
                prev = self._prev
                status = prev(sc, self._c, cfg, self._ctx, args)
                if status is _MISS:
                    status = self._launch_other(sc, cfg, args)
                else:
                    self._fast = prev
                    self._prev = fast
        if status:
            raise _err(status, self._ctx)

    def _launch_py(self, sc: c_uint64, cfg: Any, args: Sequence[Any]) -> Any:
        """With qd._speedups, what its launch did not take: the Python launch functions."""
        fast = self._fast
        status = fast(sc, self._c, cfg, self._ctx, args)
        if status is _MISS:
            prev = self._prev
            status = prev(sc, self._c, cfg, self._ctx, args)
            if status is _MISS:
                return self._launch_other(sc, cfg, args)
            self._fast = prev
            self._prev = fast
        return status

    def _launch_other(self, sc: c_uint64, cfg: Any, args: Sequence[Any]) -> Any:
        """The arguments fit neither of the last two launches' types: try the launch functions
        of the kernel's older recent signatures (a hit becomes the first one tried), then the
        layout of these types, then the general path. A kernel keeps at most _RECENT + 1 launch
        functions: ``_fast``, ``_prev`` and ``_recent``, most recent first."""
        recent = self._recent
        for i, fast in enumerate(recent):
            status = fast(sc, self._c, cfg, self._ctx, args)
            if status is not _MISS:
                recent[i] = self._prev  # the other recent ones keep their order
                self._prev = self._fast
                self._fast = fast
                return status
        layout = _Layout.get(tuple(map(type, args)))
        if layout is not None:
            status = layout.launch(sc, self._c, cfg, self._ctx, args)
            if status is not _MISS and layout.spec is not None and _sp_launch is not None:
                # qd._speedups launches this signature from now on: learn it there (at most
                # _RECENT + 1, newest first) and keep the Python functions for the others.
                specs = self._specs
                if layout.spec not in specs:
                    specs.insert(0, layout.spec)
                    del specs[_RECENT + 1:]
                return status
            if status is not _MISS:
                if self._prev is not _no_fast:
                    recent.insert(0, self._prev)
                    del recent[_RECENT - 1:]
                self._prev = self._fast
                self._fast = layout.launch
                return status
        return self._launch_general(sc, cfg, args)

    def _launch_general(self, sc: c_uint64, cfg: Any, args: Sequence[Any]) -> int:
        """Any arguments: each converted on its own (and every mistake named)."""
        n = len(args)
        arr, keep = _pack_args(args, self._ctx)
        status = _f_launch(sc, self._c, cfg, _ref(arr), _C_U32[n] if n <= MAX_ARGS else _U32(n))
        del keep  # the values arr points into lived until here
        return status

    def prepare(self, *args: Any, grid: Union[int, Sequence[int]] = 1,
                block: Union[int, Sequence[int]] = 1, shared_mem: int = 0) -> "Launcher":
        """Pre-pack a launch: the returned Launcher holds the qd_arg array and the config, so
        ``launcher(stream=s)`` is a single foreign call.

        The Launcher keeps its argument values as ctypes objects (``launcher.args``); changing
        one in place (``launcher.args[1].value = 7``) changes the next launches.
        """
        if not self._h or not self._ctx._h:
            raise self._closed_error()
        return Launcher(self, args, _make_config(grid, block, shared_mem))


def _cacheable(v: Any) -> bool:
    t = type(v)
    return t is int or (t is tuple and all(type(e) is int for e in v))


def _dims(value: Any, what: str) -> Tuple[int, int, int]:
    if type(value) is int or not isinstance(value, (tuple, list)):
        return (_u32(value, what), 1, 1)
    if not 1 <= len(value) <= 3:
        raise InvalidArgumentError(f"{what} must have 1 to 3 dimensions, not {len(value)}")
    dims = [_u32(v, what) for v in value] + [1] * (3 - len(value))
    return (dims[0], dims[1], dims[2])


def _make_config(grid: Any, block: Any, shared_mem: Any) -> _lib.LaunchConfig:
    cfg = _lib.LaunchConfig()
    cfg.grid[:] = _dims(grid, "grid")
    cfg.block[:] = _dims(block, "block")
    cfg.shared_mem_bytes = _u32(shared_mem, "shared_mem")
    return cfg


_DEFAULT_STRUCT = _make_config(1, 1, 0)  # grid=1, block=1, shared_mem=0
_DEFAULT_CONFIG = _ref(_DEFAULT_STRUCT)
_DEFAULT_ADDRESS = ctypes.addressof(_DEFAULT_STRUCT)

# qd._speedups' launch (qd/_speedups.c), or None. It packs the signatures whose _Layout.spec
# is set: (argument types, one code per argument: U int, F float, @ DeviceBuffer, # HostBuffer,
# or the struct code of an exact ctypes simple type among _SP_CODES).
_sp_launch = getattr(_lib.SPEEDUPS, "launch", None)
_SP_CODES = frozenset("UF@#bBhHiIqQfd?")


_CDATA = ctypes.c_int.__mro__[-2]  # _ctypes._CData: the base of every ctypes instance


def _arg_value(a: Any, i: int, ctx: Any) -> Any:
    """One kernel argument, for a kernel of ``ctx``, as a ctypes object whose bytes are the
    argument's value."""
    t = type(a)
    if t is int:
        if 0 <= a <= _U64_MAX:
            return c_uint64(a)
        raise ArgumentRangeError(
            f"kernel argument {i} = {a} does not fit uint64_t; pass ctypes.c_int64(...) for a "
            "signed value")
    if t is float:
        return c_double(a)
    if isinstance(a, _CDATA):
        return a
    if isinstance(a, (DeviceBuffer, HostBuffer)):
        a._check()
        if a._ctx is not ctx and isinstance(a, DeviceBuffer):
            raise WrongContextError(
                f"kernel argument {i}: this DeviceBuffer belongs to {a._ctx!r}, not to the "
                f"kernel's {ctx!r}")
        return c_uint64(a._address)
    if t is bool or a is None or isinstance(a, (str, bytes, bytearray, memoryview, float)):
        raise ArgumentTypeError(
            f"kernel argument {i}: {t.__name__} has no C type; pass a ctypes instance "
            "(e.g. ctypes.c_uint8(1), ctypes.c_float(x))")
    try:
        v = operator.index(a)
    except TypeError:
        raise ArgumentTypeError(
            f"kernel argument {i}: cannot pass {t.__name__}; use an int, a float, a qd buffer "
            "or a ctypes instance") from None
    return _arg_value(v, i, ctx)


class _Layout:
    """The fast path of ``Kernel.launch`` for one tuple of argument types.

    ``launch(sc, kc, cfg, ctx, args)`` is a function made for the types (its source names each
    argument's value: ``a0._address``, ``a1.value``, ``a2``): it checks the types and
    what the general path would refuse, writes every value into one buffer at fixed offsets
    with one ``struct.pack_into`` (so a ctypes argument costs an attribute read, not the
    re-pointing of a qd_arg), and calls qd_launch with the qd_arg array made for that buffer.
    It returns ``_MISS``, having done nothing, when the arguments do not fit (other types, a
    freed buffer or one of another context, an int out of range) or when the buffer is in use
    by another thread (the C call releases the GIL) or by a re-entrant launch: the general path
    then handles the launch, and names any mistake.

    Types with a layout: int (uint64), float (double), DeviceBuffer and HostBuffer (their
    address), and exact ctypes instances (their bytes: a simple type through its value, any
    other through ``bytes()``). Any other type (bool, None, numpy scalars, subclasses) always
    takes the general path. Layouts are shared by every kernel (the kernel's handle is an
    argument) and kept for at most 256 type tuples.
    """

    __slots__ = ("launch", "buf", "arr", "spec")

    _by_types: Dict[Tuple[type, ...], Optional["_Layout"]] = {}

    @classmethod
    def get(cls, types: Tuple[type, ...]) -> Optional["_Layout"]:
        try:
            return cls._by_types[types]
        except KeyError:
            pass
        layout = cls._make(types)
        if len(cls._by_types) < 256:
            cls._by_types[types] = layout
        return layout

    @staticmethod
    def _make(types: Tuple[type, ...]) -> Optional["_Layout"]:
        n = len(types)
        if n > MAX_ARGS:
            return None
        fmt = ["<"]
        exprs: List[str] = []
        checks = [f"type(a{i}) is not T{i}" for i in range(n)]
        after: List[str] = []
        slots: List[Tuple[int, int]] = []
        sp_codes: Optional[List[str]] = []  # the spec's codes; None: one it cannot pack
        offset = 0
        for i, t in enumerate(types):
            if t is int:
                code, size, align, expr, sp = "Q", 8, 8, f"a{i}", "U"
            elif t is float:
                code, size, align, expr, sp = "d", 8, 8, f"a{i}", "F"
            elif t is DeviceBuffer:
                code, size, align, expr, sp = "Q", 8, 8, f"a{i}._address", "@"
                after.append(f"a{i}._freed or a{i}._ctx is not ctx")
            elif t is HostBuffer:
                code, size, align, expr, sp = "Q", 8, 8, f"a{i}._address", "#"
                after.append(f"not a{i}._address or not a{i}._ctx._h")
            elif issubclass(t, _CDATA):
                size, align = sizeof(t), max(1, ctypes.alignment(t))
                # .value only for the exact ctypes simple types (a subclass may change it).
                code = _SIMPLE_CODES.get(t._type_) if t.__bases__ == (_SIMPLE,) else None
                if code is not None and struct.calcsize("<" + code) == size:
                    expr, sp = f"a{i}.value", code
                else:
                    code, expr, sp = f"{size}s", f"_bytes(a{i})", ""
            else:
                return None
            if sp_codes is not None and sp and sp in _SP_CODES:
                sp_codes.append(sp)
            else:
                sp_codes = None
            step = max(align, 8)
            start = -(-offset // step) * step
            if start > offset:
                fmt.append(f"{start - offset}x")
            fmt.append(code)
            exprs.append(expr)
            slots.append((start, size))
            offset = start + size
        layout = _Layout()
        layout.spec = (types, "".join(sp_codes).encode()) if sp_codes is not None else None
        layout.buf = ctypes.create_string_buffer(max(offset, 8))
        base = ctypes.addressof(layout.buf)
        layout.arr = (_lib.Arg * n)()
        for slot, (start, size) in zip(layout.arr, slots):
            slot.data = base + start
            slot.size = size
        names = "".join(f"a{i}, " for i in range(n))
        lines = ["def launch(sc, kc, cfg, ctx, a):",
                 "    try:",
                 f"        {names}= a",  # unpacked once: locals are cheaper than a[i]
                 "    except ValueError:",
                 "        return _MISS",
                 f"    if {' or '.join(checks)}:",
                 "        return _MISS"]
        if after:
            lines += [f"    if {' or '.join(f'({c})' for c in after)}:", "        return _MISS"]
        # The buffer's token: list.pop and list.append are each one atomic step under the GIL
        # (a lock's acquire costs several times more).
        lines += ["    try:",
                  "        token = _free.pop()",
                  "    except IndexError:",
                  "        return _MISS",
                  "    try:",
                  f"        _pack_into(_buf, 0, {', '.join(exprs)})",
                  "    except _StructError:",
                  "        _free.append(token)",
                  "        return _MISS",
                  "    try:",
                  "        return _f_launch(sc, kc, cfg, _arr, _n)",
                  "    finally:",
                  "        _free.append(token)"]
        scope: Dict[str, Any] = {f"T{i}": t for i, t in enumerate(types)}
        scope.update(_MISS=_MISS, _StructError=struct.error, _bytes=bytes,
                     _pack_into=struct.Struct("".join(fmt)).pack_into, _buf=layout.buf,
                     _arr=_ref(layout.arr), _n=_C_U32[n], _f_launch=_f_launch,
                     _free=[True])
        exec("\n".join(lines) + "\n", scope)  # noqa: S102 (built above from type names only)
        layout.launch = scope["launch"]
        return layout


_MISS = object()  # a fast path that did not apply
_RECENT = 3  # launch functions of other signatures a kernel keeps besides its last one
_ONE, _ZERO = 1, 0  # Kernel.launch's defaults (small ints are one object each in CPython)


def _no_fast(sc: Any, kc: Any, cfg: Any, ctx: Any, a: Any) -> Any:
    return _MISS  # a kernel's fast path before its first launch with arguments


# ctypes simple types by their _type_ code, as little-endian standard-size struct codes (the
# size is checked against sizeof: c_long is 8 bytes here, '<l' is 4, so it packs as bytes).
_SIMPLE_CODES = {"b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I", "l": "q",
                 "L": "Q", "q": "q", "Q": "Q", "f": "f", "d": "d", "?": "?", "c": "c"}
_SIMPLE = ctypes.c_int.__mro__[1]  # _ctypes._SimpleCData


def _pack_args(args: Sequence[Any], ctx: Any) -> Tuple[Any, List[Any]]:
    """(qd_arg array, the ctypes objects it points into) for a kernel of ``ctx``."""
    values = [_arg_value(a, i, ctx) for i, a in enumerate(args)]
    arr = (_lib.Arg * len(values))()
    for slot, v in zip(arr, values):
        slot.data = ctypes.addressof(v)
        slot.size = sizeof(v)
    return arr, values


class Launcher:
    """A pre-packed launch (``Kernel.prepare``): ``launcher(stream=s)`` is one foreign call."""

    __slots__ = ("_kernel", "_kc", "_cfg", "_cfg_ref", "_arr", "_arr_ref", "_n", "_values")

    def __init__(self, kernel: Kernel, args: Sequence[Any], config: _lib.LaunchConfig) -> None:
        self._kernel = kernel
        self._kc = kernel._c
        self._cfg = config
        self._cfg_ref = _ref(config)
        if args:
            self._arr, self._values = _pack_args(args, kernel._ctx)
            self._arr_ref = _ref(self._arr)
        else:
            self._arr, self._values = None, []
            self._arr_ref = _NULL
        n = len(self._values)
        self._n = _C_U32[n] if n <= MAX_ARGS else _U32(n)

    @property
    def kernel(self) -> Kernel:
        """The kernel this launcher launches."""
        return self._kernel

    @property
    def args(self) -> Tuple[Any, ...]:
        """The ctypes objects holding the argument values (mutable in place)."""
        return tuple(self._values)

    def __call__(self, *, stream: Stream) -> None:
        """Queue the pre-packed launch on ``stream`` (required)."""
        kernel = self._kernel
        if not isinstance(stream, Stream):
            stream = _as_stream(stream, kernel._ctx)
        if not stream._h or not stream._ctx._h:
            raise stream._closed_error()
        if not kernel._h or not kernel._ctx._h:
            raise kernel._closed_error()
        status = _f_launch(stream._c, self._kc, self._cfg_ref, self._arr_ref, self._n)
        if status:
            raise _err(status, kernel._ctx)

    launch = __call__

    def __repr__(self) -> str:
        return f"<qd.Launcher {self._kernel._name!r} args={len(self._values)}>"


class Task:
    """One task of ``launch_parallel``: tasks of one ``group`` run in order on one pooled
    stream; different groups run concurrently. The arguments are packed at construction."""

    __slots__ = ("kernel", "group", "_cfg", "_arr", "_values", "_attrs")

    def __init__(self, kernel: Kernel, *args: Any, grid: Union[int, Sequence[int]] = 1,
                 block: Union[int, Sequence[int]] = 1, shared_mem: int = 0,
                 group: int = 0, cluster: Optional[Union[int, Sequence[int]]] = None,
                 programmatic: bool = False, priority: Optional[int] = None,
                 completion_event: Optional[Event] = None) -> None:
        """The launch attributes are Kernel.launch's (``qd_task.attrs``)."""
        if not isinstance(kernel, Kernel):
            raise HandleTypeError(f"kernel must be a qd.Kernel, not {type(kernel).__name__}")
        self.kernel = kernel
        self.group = _u32(group, "group")
        self._cfg = _make_config(grid, block, shared_mem)
        self._attrs = _LaunchAttrs(cluster, programmatic, priority, completion_event)
        if args:
            self._arr, self._values = _pack_args(args, kernel._ctx)
        else:
            self._arr, self._values = None, []

    def __repr__(self) -> str:
        return f"<qd.Task group={self.group} {self.kernel._name!r} args={len(self._values)}>"


def _as_task(t: Any) -> Task:
    if isinstance(t, Task):
        return t
    if isinstance(t, tuple) and len(t) == 5:
        group, kernel, grid, block, args = t
        return Task(kernel, *args, grid=grid, block=block, group=group)
    raise ArgumentTypeError(
        f"tasks must be qd.Task or (group, kernel, grid, block, args) tuples, not {t!r}")


_ARG_PTR = POINTER(_lib.Arg)
_ATTR_PTR = POINTER(_lib.LaunchAttr)


class _LaunchAttrs:
    """The qd_launch_attr array of the launch attributes given (none: a NULL array)."""

    __slots__ = ("arr", "event")

    def __init__(self, cluster: Any, programmatic: Any, priority: Any, event: Any) -> None:
        items = []
        if cluster is not None:
            a = _lib.LaunchAttr()
            a.kind = _api.QD_LAUNCH_ATTR_CLUSTER_DIM
            a.cluster[:] = _dims(cluster, "cluster")
            items.append(a)
        if programmatic:
            a = _lib.LaunchAttr()
            a.kind = _api.QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION
            a.value = 1
            items.append(a)
        if priority is not None:
            if type(priority) is not int:
                raise ArgumentTypeError(f"priority must be an int, not {type(priority).__name__}")
            if not -2**31 <= priority < 2**31:
                raise InvalidArgumentError(f"priority {priority} does not fit in 32 bits")
            a = _lib.LaunchAttr()
            a.kind = _api.QD_LAUNCH_ATTR_PRIORITY
            a.value = priority
            items.append(a)
        self.event = event  # kept: the handle must stay valid until the call
        if event is not None:
            if not isinstance(event, Event):
                raise HandleTypeError(
                    f"completion_event must be a qd.Event, not {type(event).__name__}")
            if not event._h:
                raise event._closed_error()
            a = _lib.LaunchAttr()
            a.kind = _api.QD_LAUNCH_ATTR_COMPLETION_EVENT
            a.event = event._h
            items.append(a)
        if items:
            self.arr = (_lib.LaunchAttr * len(items))(*items)
        else:
            self.arr = None

    @property
    def ref(self) -> Any:
        return _ref(self.arr) if self.arr is not None else _NULL

    @property
    def count(self) -> Any:
        return _U32(0 if self.arr is None else len(self.arr))


def launch_parallel(tasks: Iterable[Union[Task, Tuple[int, Kernel, Any, Any, Sequence[Any]]]],
                    *, stream: Stream) -> None:
    """Stream-parallel launch (``qd_launch_parallel``): every task starts after the work
    already queued on ``stream``, and ``stream`` waits for all of them; no host sync.

    Raises:
        PoolExhaustedError: no stream of the pool is free (nothing is queued).
    """
    items = [_as_task(t) for t in tasks]
    stream = _as_stream(stream, items[0].kernel._ctx if items else None)
    sc = stream._c
    arr = (_lib.Task * len(items))()
    size = sizeof(_lib.Task)
    for slot, t in zip(arr, items):
        k = t.kernel
        if not k._h or not k._ctx._h:
            raise k._closed_error()
        slot.struct_size = size
        slot.group = t.group
        slot.kernel = k._h
        slot.config = t._cfg
        if t._arr is not None:
            slot.args = ctypes.cast(t._arr, _ARG_PTR)
            slot.num_args = len(t._values)
        if t._attrs.arr is not None:
            slot.attrs = ctypes.cast(t._attrs.arr, _ATTR_PTR)
            slot.num_attrs = len(t._attrs.arr)
    status = _f_launch_parallel(sc, _ref(arr), _U32(len(items)))
    if status:
        raise _err(status, stream._ctx)


# ----------------------------------------------------------------------------------------------
# Host callbacks
# ----------------------------------------------------------------------------------------------


def launch_host_fn(fn: Callable[..., Any], *, stream: Stream, with_status: bool = False) -> None:
    """Queue ``fn()`` on ``stream`` (``qd_launch_host_fn``): it runs on a host thread after
    all earlier work on the stream, and later work waits for it.

    ``fn`` runs with the GIL held and must not call blocking qd functions of the same context
    (they raise InvalidOperationError). If it raises, the exception is reported as a
    CallbackError by the next ``synchronize()`` on the context. ``fn`` is kept alive until it
    has run; if queuing fails it is never called.

    With ``with_status=True`` (``qd_launch_host_status_fn``, as CuPy's ``add_callback``) it is
    called as ``fn(stream, status)`` exactly once, whatever happens to the context, so cleanup
    code runs either way: ``status`` is ``Status.SUCCESS`` when it ran in turn, and
    ``Status.ERROR_DEVICE_LOST`` when the context was lost before its turn (it is then called
    by the context's destroy at the latest), or ``Status.ERROR_INVALID_HANDLE`` when the
    context's destroy began before its turn. It cannot be captured: on a capturing stream it
    raises InvalidOperationError and the capture goes on.
    """
    sc = _stream_c(stream)
    if not callable(fn):
        raise ArgumentTypeError(f"fn must be callable, not {type(fn).__name__}")
    if with_status:
        status = _enqueue_status(stream, fn, stream._ctx._cb_errors)
    else:
        status = _enqueue(stream, fn, stream._ctx._cb_errors)
    if status:
        raise _err(status, stream._ctx)
