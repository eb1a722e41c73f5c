"""Share sessions (KIP-932, Kafka's ShareSessionCache): per (group, member), the share-partitions a consumer
fetches from this broker and the epoch its next request must carry.

Epochs: 0 opens a session (replacing one the member had), -1 closes it, anything else must equal the
session's expected epoch, which then moves to the next (wrapping from 2^31-1 to 1). At most
`max_sessions` (group.share.max.share.sessions) exist at once. A session belongs to the connection that
opened it; when that connection closes, the session goes and its member's records are released.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from minikafka.protocol.errors import INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, SHARE_SESSION_NOT_FOUND

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
SessionKey = tuple[str, str]  # (group id, member id)
SharePartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


class ShareSessionError(Exception):
    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    connection: str
    epoch: int = 1  # expected epoch of the next request
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def open(self, group_id: str, member_id: str, connection: str) -> tuple[ShareSession, ShareSession | None]:
        """(new session, the one it replaced)."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            if old is not None:
                self.sessions[key] = old
            raise ShareSessionError(SHARE_SESSION_LIMIT_REACHED,
                                    f"The share session cache is full ({self.max_sessions} sessions).")
        session = self.sessions[key] = ShareSession(group_id, member_id, connection)
        return session, old

    def get(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with this epoch (> 0 or -1) continues; raises with Kafka's error."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(SHARE_SESSION_NOT_FOUND,
                                    f"Share session for member {member_id} of group {group_id} not found.")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise ShareSessionError(INVALID_SHARE_SESSION_EPOCH,
                                    f"Share session epoch {epoch} is invalid; expected {session.epoch}.")
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def close_connection(self, connection: str) -> list[ShareSession]:
        gone = [s for s in self.sessions.values() if s.connection == connection]
        for s in gone:
            del self.sessions[(s.group_id, s.member_id)]
        return gone

    def of_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))
