"""``secmeta serve``: the store behind Kafka's wire protocol (admin and SASL APIs)."""
