"""The KIP-848 consumer group protocol (ConsumerGroupHeartbeat / ConsumerGroupDescribe): group model,
server-side assignors, member reconciliation, records in `__consumer_offsets`, and the coordinator
that drives them. Lives beside the classic coordinator (coordinator/group_*.py), which owns the
shared partition/loading/append machinery and offsets."""
