"""secmeta.projections.entity_events: an image's open entities as the events that open them."""

from hypothesis import given

from secmeta.events.entities import KINDS
from secmeta.projections.entity_events import opening_events
from secmeta.projections.image import SecurityDelta, SecurityImage
from tests.projections.test_image_properties import contents, envelopes, event_lists, replay


@given(event_lists)
def test_replaying_an_images_opening_events_gives_the_image_back(event_list):
    """Any consistent history: one opening event per open entity, replayed, rebuilds the same image."""
    image = replay([envelopes(event_list)])
    events = list(opening_events(image))
    assert len({e.entity_key for e in events}) == len(events)
    delta = SecurityDelta(SecurityImage.EMPTY)
    delta.replay_all(envelopes(events))
    assert contents(delta.apply(image.next_offset)) == contents(image)


@given(event_lists)
def test_opening_events_of_some_kinds_are_those_kinds_only(event_list):
    image = replay([envelopes(event_list)])
    for kind in KINDS:
        assert [e for e in opening_events(image, [kind])] == [
            e for e in opening_events(image) if type(e) in kind.opens]
