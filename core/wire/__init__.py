"""Kafka's wire protocol for secmeta, encoded with kio (generated from Kafka's message definitions).

``codec`` frames, headers and the table of API versions served; ``convert`` maps kio
entities to secmeta's types and back; ``client`` is a small admin client used by the CLI.
"""
