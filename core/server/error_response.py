"""A request-level error answer for any API, as Kafka's ``AbstractRequest.getErrorResponse`` builds it.

The response carries the error in its top-level ``error_code`` (and ``error_message`` where
the version has one), throttle time 0, and empty or neutral values everywhere else.
Responses without a top-level error code cannot carry a request-level error: ``None``.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode

from core.errors import ErrorCode

__all__ = ["error_response"]


def _neutral(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        return None
    if origin is tuple:
        return ()
    if isinstance(tp, type):
        if issubclass(tp, bool):
            return False
        if issubclass(tp, datetime.datetime):
            return tp(datetime.datetime.fromtimestamp(0, datetime.UTC))
        if issubclass(tp, datetime.timedelta):
            return tp(datetime.timedelta(0))
        if issubclass(tp, KioErrorCode):
            return KioErrorCode.none
        if issubclass(tp, int):
            return tp(-1) if tp is not int else -1
        if issubclass(tp, str):
            return ""
        if issubclass(tp, bytes):
            return b""
        if tp is uuid.UUID:
            return uuid.UUID(int=0)
        if dataclasses.is_dataclass(tp):
            return _filled(tp, {})
    raise TypeError(f"no neutral value for {tp!r}")


def _filled(cls: type, values: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = dict(values)
    for f in dataclasses.fields(cls):
        if f.name in kwargs:
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _neutral(hints[f.name])
    return cls(**kwargs)


def error_response(cls: type, code: ErrorCode, message: str | None) -> Any | None:
    """An instance of the kio response ``cls`` carrying ``code`` at the top level, or None if it cannot."""
    names = {f.name for f in dataclasses.fields(cls)}
    if "error_code" not in names:
        return None
    values: dict[str, Any] = {"error_code": KioErrorCode(int(code))}
    if "error_message" in names:
        values["error_message"] = message
    if "throttle_time" in names:
        hints = typing.get_type_hints(cls)
        values["throttle_time"] = hints["throttle_time"](datetime.timedelta(0))
    return _filled(cls, values)
