"""Streams groups (KIP-1071): the broker-side task assignment of Kafka Streams' rebalance protocol."""
