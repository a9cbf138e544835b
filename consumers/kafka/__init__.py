"""Kafka side of secmeta: the wire format, the publisher, the follower and the audit job.

Modules are imported directly (``from secmeta.consumers.kafka.wire import encode_message``)
so that importing the package does not load confluent-kafka.
"""
