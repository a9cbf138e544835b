"""One error root: every exception class secmeta defines derives from SecmetaError.

The classes are found by importing every module of the four packages, so a new
``class SomethingError(ValueError)`` anywhere fails here, and catching
``SecmetaError`` (as the CLI does) keeps catching every error we raise on purpose.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import secmeta.consumers
import secmeta.core
import secmeta.events
import secmeta.projections
from secmeta.events.errors import SecmetaError

# Exceptions used as control flow inside one module; none of them reaches a caller.
CONTROL_FLOW = {
    # the codec catches it and decodes with fastavro instead
    "secmeta.events.avro_decoder.Unsupported": "compiled decoder cannot handle the schema",
    "secmeta.events.avro_decoder.Malformed": "compiled decoder cannot read the bytes",
}


def _modules():
    for package in (secmeta.events, secmeta.projections, secmeta.core, secmeta.consumers):
        yield package
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if not info.name.endswith(".__main__"):  # running it would start the CLI
                yield importlib.import_module(info.name)


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for module in _modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


@pytest.fixture(scope="module")
def exceptions() -> dict[str, type[BaseException]]:
    return _exception_classes()


def test_the_walk_finds_the_errors_of_every_package(exceptions):
    for name in (
        "secmeta.events.errors.EventsError",
        "secmeta.projections.snapshot.SnapshotError",
        "secmeta.core.errors.QueryError",
        "secmeta.core.log.format.FrameError",
        "secmeta.consumers.kafka.wire.NotOurMessage",
        "secmeta.consumers.spark.rows.RowError",
    ):
        assert name in exceptions


def test_every_public_exception_derives_from_secmeta_error(exceptions):
    # Private classes (secmeta.core.server.connection._Close, ...) are control flow inside their module.
    public = {n: cls for n, cls in exceptions.items() if n not in CONTROL_FLOW and not cls.__name__.startswith("_")}
    outside = {n: [b.__name__ for b in cls.__mro__[1:]] for n, cls in public.items() if not issubclass(cls, SecmetaError)}
    assert outside == {}


def test_control_flow_exceptions_stay_exempt_on_purpose(exceptions):
    # listed so that the exemption is deliberate: drop an entry once it is gone or a SecmetaError
    for name in CONTROL_FLOW:
        assert name in exceptions
        assert not issubclass(exceptions[name], SecmetaError)


def test_there_is_one_root_reexported_by_core():
    from secmeta.core import SecmetaError as from_core
    from secmeta.core.errors import SecmetaError as from_core_errors

    assert from_core is SecmetaError
    assert from_core_errors is SecmetaError
