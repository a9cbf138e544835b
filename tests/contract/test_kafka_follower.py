"""The Kafka follower (consumers/kafka/follower.py) against librdkafka's mock cluster.

The publisher mirrors the log up to each published offset (``publish_available(max_events=...)``) and
the follower, reading in batches of 4 events so the writer's multi-event requests arrive split,
catches up to it; then a second follower bootstraps from the compacted state topic at the end.
"""

from __future__ import annotations

import uuid

import pytest

from tests.contract.images import image_of
from tests.contract.suite import ReaderContract
from tests.extras import require_extra

require_extra("confluent_kafka", "kafka")

from secmeta.consumers.kafka.follower import Follower  # noqa: E402
from secmeta.consumers.kafka.publisher import Publisher  # noqa: E402

TIMEOUT = 60


class TestKafkaFollower(ReaderContract):
    bootstrap: str

    @pytest.fixture(autouse=True)
    def _mock_cluster(self, kafka_bootstrap):
        self.bootstrap = kafka_bootstrap

    def images(self, written, offsets):
        history, state = (f"contract-{name}-{uuid.uuid4().hex[:8]}" for name in ("history", "state"))
        images = {}
        with Publisher(written.store_dir, written.keyring, self.bootstrap, history_topic=history,
                       state_topic=state) as publisher:
            follower = Follower(self.bootstrap, history_topic=history, state_topic=state,
                                checkpoint_dir=written.store_dir.parent / f"follower-{history}", max_batch=4)
            with follower:
                for n in offsets:
                    if n:  # offset 0: nothing published yet, the follower holds the empty image
                        publisher.publish_available(timeout=TIMEOUT, max_events=n - publisher.checkpoint)
                        assert publisher.checkpoint == n and follower.catch_up(TIMEOUT)
                    assert follower.image.next_offset == n
                    images[n] = image_of(follower.view(written.config))
        end = written.recording.end
        with Follower(self.bootstrap, history_topic=history, state_topic=state,
                      checkpoint_dir=written.store_dir.parent / f"bootstrap-{history}") as bootstrapped:
            bootstrapped.bootstrap_from_state_topic(timeout=TIMEOUT)
            assert bootstrapped.image.next_offset == end
            assert image_of(bootstrapped.view(written.config)) == written.recording.images[end]
        return images
