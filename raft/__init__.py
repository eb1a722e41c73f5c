"""The metadata quorum (issue 16, KRaft-style): a Raft core as a pure state machine (raft.py) over the
quorum's replicated log (log.py, durable in store.py), carried over Kafka's quorum RPCs (wire.py,
peer.py) by a per-node driver (driver.py) in KRaft combined mode. A single node never imports it."""
