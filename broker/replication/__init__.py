"""Partition replication on a multi-node cluster (issue 16): per-partition state, the replica
manager (`state.replicas`) and the follower fetcher. Never imported by a single node."""
