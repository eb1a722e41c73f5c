"""broker/replication/partition_state.py: HW, follower catch-up, ISR shrink/expand (pure)."""
from minikafka.broker.replication.partition_state import UNKNOWN, PartitionState


def leader(isr=(1, 2, 3), leo=10, hw=5, now=0.0) -> PartitionState:
    s = PartitionState("t", 0, local_id=1)
    assert s.become_leader(3, 7, (1, 2, 3), isr, leo, hw, now)
    return s


def test_new_leader_keeps_its_hw_and_forgets_follower_positions():
    s = leader()
    assert s.is_leader and s.high_watermark == 5 and s.epoch_start_offset == 10
    assert all(v.leo == UNKNOWN for v in s.followers.values())
    assert not s.advance_hw(10)  # followers' positions unknown: no progress


def test_hw_is_min_leo_over_isr_and_never_moves_back():
    s = leader()
    s.update_follower(2, 8, 10, 1.0)
    assert not s.advance_hw(10)  # follower 3 still unknown
    s.update_follower(3, 7, 10, 1.0)
    assert s.advance_hw(10) and s.high_watermark == 7
    s.update_follower(3, 6, 10, 2.0)  # a follower that truncated does not pull the HW back
    assert not s.advance_hw(10) and s.high_watermark == 7
    s.update_follower(2, 10, 10, 3.0)
    s.update_follower(3, 10, 10, 3.0)
    assert s.advance_hw(10) and s.high_watermark == 10


def test_hw_with_only_leader_in_isr_is_leader_leo():
    s = leader(isr=(1,))
    assert s.advance_hw(12) and s.high_watermark == 12


def test_hw_respects_pending_expansion():
    s = leader(isr=(1, 2))
    s.update_follower(2, 10, 10, 1.0)
    s.update_follower(3, 9, 10, 1.0)
    s.pending_isr = (1, 2, 3)
    assert s.advance_hw(10) and s.high_watermark == 9


def test_shrink_after_lag_unless_caught_up():
    s = leader(now=0.0)
    s.update_follower(2, 10, 10, 100.0)  # caught up at 100
    s.update_follower(3, 4, 10, 100.0)  # behind
    assert s.out_of_sync(10, 200.0, lag_ms=250) == []  # 3 counts as caught up at 0 (leader change)
    assert s.out_of_sync(10, 200.0, lag_ms=50) == [3]
    # 2 is at the leader's LEO: never out of sync however old its last catch-up
    assert s.out_of_sync(10, 10_000.0, lag_ms=50) == [3]
    # once the leader appends, 2 is behind and its last catch-up (100) counts
    assert s.out_of_sync(11, 200.0, lag_ms=50) == [2, 3]


def test_caught_up_when_reaching_leo_of_previous_fetch():
    s = leader(now=0.0)
    s.update_follower(3, 4, 10, 100.0)  # leader LEO was 10 at this fetch
    s.update_follower(3, 10, 12, 300.0)  # reached 10: caught up as of the previous fetch (100)
    assert s.followers[3].last_caught_up_ms == 100.0
    s.update_follower(3, 12, 12, 400.0)
    assert s.followers[3].last_caught_up_ms == 400.0


def test_join_isr_needs_hw_and_current_epoch():
    s = leader(isr=(1, 2), leo=10, hw=10)
    s.update_follower(2, 10, 10, 1.0)
    s.update_follower(3, 9, 10, 1.0)
    assert not s.can_join_isr(3)
    s.update_follower(3, 10, 10, 2.0)
    assert s.can_join_isr(3)
    assert not s.can_join_isr(2)  # already in
    assert not s.can_join_isr(4)  # not a replica


def test_same_epoch_update_keeps_follower_state():
    s = leader()
    s.update_follower(2, 9, 10, 1.0)
    s.pending_isr = (1, 2)
    assert not s.become_leader(3, 8, (1, 2, 3), (1, 2), 10, 0, 5.0)
    assert s.followers[2].leo == 9 and s.pending_isr is None and s.isr == (1, 2)
    assert s.become_leader(4, 9, (1, 2, 3), (1, 2), 11, 5, 6.0)  # a new epoch resets
    assert s.followers[2].leo == UNKNOWN and s.epoch_start_offset == 11


def test_follower_transitions():
    s = PartitionState("t", 0, local_id=2)
    assert s.become_follower(1, 3, 7, (1, 2, 3), (1, 2, 3))
    assert not s.is_leader and not s.advance_hw(10)
    assert not s.become_follower(1, 3, 8, (1, 2, 3), (1, 2))  # ISR change only
    assert s.become_follower(3, 4, 9, (1, 2, 3), (2, 3))
    assert not s.update_follower(1, 5, 10, 1.0)
