"""Shared helper for the control-function tests."""

from secmeta.core.control import ControlResult


def unpacked(result: ControlResult) -> tuple[list, object]:
    """(events as a list, response) of a control function's result, checking it is a ControlResult."""
    assert isinstance(result, ControlResult)
    return list(result.events), result.response
