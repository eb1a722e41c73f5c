"""A built-in, Confluent-compatible Schema Registry (issue 30): the REST API of Confluent Schema Registry
(v7 semantics) on its own HTTP listener (`schema.registry.listener`), its state kept in the compacted
`_schemas` topic in Confluent's JSON key/value formats and replayed into memory on start.

Parts: errors.py (Confluent's error codes and messages), records.py (the `_schemas` key/value formats),
state.py (the in-memory state a replay of `_schemas` rebuilds), avro_schema.py (parsing, canonical form and
compatibility through Apache Avro's own checker), registry.py (the operations: register, look up,
delete, config, mode, compatibility), store.py (the `_schemas` partition: append and replay), rest.py (the
HTTP routes, aiohttp). It knows nothing of the broker: broker/server.py hands it the partition log.
"""
