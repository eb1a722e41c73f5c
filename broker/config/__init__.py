"""Broker configuration: the static keys (core.py), dynamic broker configs (dynamic.py), Kafka's key table
(kafka_keys.py), per-group configs (group_configs.py) and finalized feature levels (features.py)."""
