"""Share groups (KIP-932) in the group coordinator: membership (ShareGroupHeartbeat), the assignment of
partitions to members (several members may share a partition), describe, and their records in
`__consumer_offsets`. The delivery state of records lives with the partition leaders (broker/share/) and the
share coordinator (coordinator/share/)."""
