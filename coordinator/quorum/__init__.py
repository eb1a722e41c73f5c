"""The metadata quorum (issue 16, KRaft-style): a Raft core as a pure state machine (raft.py) over the
quorum's replicated log (log.py). Not wired into the broker yet: a single node runs without it."""
