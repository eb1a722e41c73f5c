"""The share coordinator (Kafka's share-coordinator module, KIP-932): the persisted state of share-partitions
(start offset, state epoch, leader epoch, acknowledged/archived batches) kept in `__share_group_state` as
ShareSnapshot records and ShareUpdate deltas; persister.py is the interface partition leaders use."""
