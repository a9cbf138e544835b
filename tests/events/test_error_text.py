"""error_text: an exception's class and message, the same text whatever object the message named by its repr."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secmeta.events.codec import EventCodec
from secmeta.events.error_text import error_text
from secmeta.events.errors import MalformedEventError
from secmeta.events.records import ClientQuotaAltered

CODEC = EventCodec()


@given(st.binary(min_size=1, max_size=40), st.integers(min_value=1, max_value=10))
def test_a_corrupt_body_is_described_by_the_same_text_without_an_address(body_tail, cut):
    """Any quota event body cut short or with bytes appended is refused by a text that names the event type and
    the same every time it is decoded again (fresh streams each time: fastavro named each by its address)."""
    body = CODEC.encode_event(ClientQuotaAltered("user=alice", "producer_byte_rate", 1024.0))
    for bad in (body[:-cut], body[:-cut] + body_tail):
        texts = set()
        for _ in range(2):
            try:
                CODEC.decode_event("ClientQuotaAltered", bad)
            except MalformedEventError as exc:
                texts.add(str(exc))
            else:
                texts.add("decoded")
        (text,) = texts
        assert " at 0x" not in text and "object at" not in text  # "byte 0x80" (a UnicodeDecodeError's) is stable
        assert text == "decoded" or text.startswith("ClientQuotaAltered body ")


def test_a_stream_named_by_its_repr_becomes_the_input():
    """fastavro's ``cannot read double from <_io.BytesIO object at 0x...>``, from two streams, is one text."""
    texts = {error_text(EOFError(f"cannot read double from {io.BytesIO()!r}")) for _ in range(3)}
    assert texts == {"EOFError: cannot read double from the input"}


@pytest.mark.parametrize("exc", [ValueError(f"bad {object()!r}"), KeyError(print), TypeError(f"at {list!r} {len!r}")])
def test_no_address_is_kept(exc):
    text = error_text(exc)
    assert text.startswith(type(exc).__name__ + ": ") and " at 0x" not in text


def test_the_class_alone_when_the_message_is_empty():
    assert error_text(EOFError()) == "EOFError"


def test_str_not_repr_so_the_bytes_being_decoded_stay_out():
    """A UnicodeDecodeError's repr holds the whole bytes object it was decoding (perhaps a secret's)."""
    secret = b"\xffhunter2-secret"
    try:
        secret.decode()
    except UnicodeDecodeError as exc:
        text = error_text(exc)
    assert "hunter2" not in text and text.startswith("UnicodeDecodeError: ")
