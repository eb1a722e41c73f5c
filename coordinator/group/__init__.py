"""The group coordinator (Kafka's GroupCoordinator): classic groups (JoinGroup/SyncGroup/Heartbeat), consumer
groups of the KIP-848 protocol (consumer/), committed offsets, all kept in `__consumer_offsets`."""
