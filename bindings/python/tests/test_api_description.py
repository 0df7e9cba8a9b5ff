"""The binding's hand-written layer against its generated one (qd/_api.py, written by abi/gen
from abi/qd-api.json): what qd exports for each status, and the few values the idiomatic layer
spells its own way. That qd/_api.py is current is test_header.py's job (and meson's, suite abi:
abi/gen --check)."""

from __future__ import annotations

import ctypes

import pytest

import qd
from qd import _api, _errors


@pytest.mark.parametrize("status", [v for k, v in vars(qd.Status).items() if k.isupper() and v],
                         ids=lambda v: qd.status_name(v))
def test_every_status_but_success_has_its_exception_class_exported(status: int) -> None:
    cls = _errors.error_for_status(status, "m").__class__
    assert cls is not qd.QdError and issubclass(cls, qd.QdError)
    assert cls.default_status == status
    assert getattr(qd, cls.__name__) is cls and cls.__name__ in qd.__all__
    assert cls.__module__ == "qd"


def test_every_exception_class_exported_by_qd_maps_to_a_status() -> None:
    """Each QdError subclass of qd is a status's class, or one of the binding's own, which
    derive from the class of the status C gives for the same mistake."""
    own = {qd.ArgumentTypeError, qd.ArgumentRangeError, qd.ObjectClosedError, qd.HandleTypeError}
    for name in qd.__all__:
        cls = getattr(qd, name)
        if not (isinstance(cls, type) and issubclass(cls, qd.QdError)) or cls is qd.QdError:
            continue
        if cls is qd.CallbackError:
            assert cls().status == qd.Status.SUCCESS  # not a C status: the C call succeeded
            continue
        assert _errors._BY_STATUS.get(cls.default_status) is (
            cls if cls not in own else cls.__mro__[1]), name
        assert qd.status_name(cls.default_status).startswith("QD_"), name


def test_backend_enum_is_qd_backend() -> None:
    """qd.Backend (hand-written, with its labels) has exactly the values of qd_backend."""
    header = {name[len("QD_BACKEND_"):]: value for name, value in vars(_api).items()
              if name.startswith("QD_BACKEND_")}
    assert {m.name: m.value for m in qd.Backend} == header


def test_descriptor_mirrors_start_as_their_init_macros_and_keep_what_is_given() -> None:
    # QD_LAUNCH_CONFIG_INIT: one block of one thread; QD_CONDITIONAL_DESC_INIT: an IF;
    # QD_TASK_INIT: its config is QD_LAUNCH_CONFIG_INIT.
    cfg = _api.LaunchConfig()
    assert (cfg.struct_size, list(cfg.grid), list(cfg.block)) == (ctypes.sizeof(cfg), [1] * 3,
                                                                   [1] * 3)
    assert _api.ConditionalDesc().kind == _api.QD_CONDITIONAL_IF
    task = _api.Task()
    assert (task.config.struct_size, list(task.config.grid)) == (ctypes.sizeof(cfg), [1] * 3)
    assert _api.ConditionalDesc(kind=_api.QD_CONDITIONAL_WHILE).kind == _api.QD_CONDITIONAL_WHILE
    given = (ctypes.c_uint32 * 3)(4, 5, 6)
    assert list(_api.LaunchConfig(grid=given).grid) == [4, 5, 6]
    assert list(_api.LaunchConfig(0, given).grid) == [4, 5, 6]
