"""The share-partition leader's side of share groups (KIP-932, Kafka's kafka.server.share): in-flight record
state per share-partition, share sessions, and the ShareFetch / ShareAcknowledge work."""
