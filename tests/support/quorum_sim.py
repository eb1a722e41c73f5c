"""A deterministic simulation of a metadata quorum (raft/core.py): simulated time, a
seeded network that delays, drops and cuts links, crashes and restarts (persistent state kept), and
clients proposing to whoever is leader. Invariant checks run after every step:

* election safety: at most one leader per epoch, ever;
* committed entries never change and are the same prefix on every node;
* a node's high watermark never moves back while it stays up;
* every proposal acknowledged as committed is in the final committed log exactly once.

With `snapshot_every` > 0 each node on its own snapshots its committed log (KIP-630) whenever that many
committed entries follow its log start, and drops the prefix; a lagging follower then installs the
leader's snapshot (FetchSnapshot). A node's committed history is then its snapshot + its committed suffix.
`crash_mid_install` is the chance that a node crashes after its installed snapshot is durable but before
its log was reset (it recovers on boot as the file store does on open: PersistentState.recover).
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from minikafka.raft.log import Entry
from minikafka.raft.core import LEADER, FetchSnapshotResponse, Message, PersistentState, RaftConfig, RaftNode

TICK_MS = 10


class Crash(Exception):
    """A simulated crash in the middle of a durable step."""


class SimState(PersistentState):
    """In-memory persistent state that may crash between an installed snapshot and the log reset."""
    crash_chance = 0.0
    rng = random.Random(0)

    def install_snapshot(self, offset, epoch, state) -> None:
        if self.crash_chance and self.rng.random() < self.crash_chance:
            self.snapshot = (offset, epoch, state)  # durable; the log not yet reset
            raise Crash()
        super().install_snapshot(offset, epoch, state)


@dataclass
class Faults:
    drop: float = 0.05          # per message
    delay_ms: tuple[int, int] = (1, 30)
    crash_every_ms: int = 3000  # mean time between crashes (0: none)
    down_ms: tuple[int, int] = (200, 4000)
    cut_every_ms: int = 4000    # mean time between link cuts that isolate one node (0: none)
    cut_ms: tuple[int, int] = (500, 5000)
    propose_every_ms: int = 50
    snapshot_every: int = 0     # committed entries past the log start that make a node snapshot (0: never)
    crash_mid_install: float = 0.0


@dataclass
class Sim:
    seed: int
    voters: tuple[int, ...] = (1, 2, 3)
    faults: Faults = field(default_factory=Faults)
    observers: tuple[int, ...] = ()  # broker-only nodes: replicate, never vote or lead
    config: RaftConfig = field(default_factory=lambda: RaftConfig(fetch_timeout_ms=1000, election_timeout_ms=500,
                                                                   election_backoff_max_ms=300))

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = 0
        self.members = (*self.voters, *self.observers)
        self.persistent = {v: SimState() for v in self.members}
        for state in self.persistent.values():
            state.rng = random.Random(self.rng.random())
        self.nodes: dict[int, RaftNode | None] = {v: self._boot(v) for v in self.members}
        self.down_until: dict[int, int] = {}
        self.isolated: dict[int, int] = {}  # node -> until
        self.queue: list[tuple[int, int, int, int, Message]] = []
        self._seq = 0
        self.leaders: dict[int, int] = {}
        self.committed: list[Entry] = []
        self.hw_seen: dict[int, int] = {v: 0 for v in self.members}
        self.acked: dict[object, int] = {}  # payload -> offset acknowledged at
        self.pending: dict[object, tuple[int, int, int]] = {}  # payload -> (leader, epoch, offset)
        self._next_payload = 0
        self.stats = {"crashes": 0, "cuts": 0, "elections": 0, "delivered": 0, "dropped": 0}
        # one-way losses of one kind of message: (src, dst, message type) never arrives (a peer client that
        # cannot get its requests answered while the other direction works)
        self.lost: set[tuple[int, int, type]] = set()

    def _boot(self, v: int) -> RaftNode:
        self.persistent[v].recover()
        return RaftNode(v, self.voters, self.persistent[v], self.config, random.Random(self.rng.random()), self.now)

    # -- network ------------------------------------------------------------------------------------------
    def _send(self, src: int, out: list[tuple[int, Message]]) -> None:
        for dst, msg in out:
            if self.rng.random() < self.faults.drop:
                self.stats["dropped"] += 1
                continue
            self._seq += 1
            heapq.heappush(self.queue, (self.now + self.rng.randint(*self.faults.delay_ms), self._seq, src, dst, msg))

    def _reachable(self, a: int, b: int) -> bool:
        return not (a in self.isolated or b in self.isolated) and self.nodes.get(b) is not None

    # -- faults -------------------------------------------------------------------------------------------
    def _maybe_fault(self) -> None:
        f = self.faults
        if f.crash_every_ms and self.rng.random() < TICK_MS / f.crash_every_ms:
            up = [v for v, n in self.nodes.items() if n is not None]
            if up:
                v = self.rng.choice(up)
                self.nodes[v] = None
                self.down_until[v] = self.now + self.rng.randint(*f.down_ms)
                self.stats["crashes"] += 1
        if f.cut_every_ms and self.rng.random() < TICK_MS / f.cut_every_ms:
            v = self.rng.choice(self.members)
            self.isolated[v] = self.now + self.rng.randint(*f.cut_ms)
            self.stats["cuts"] += 1
        for v, until in list(self.down_until.items()):
            if self.now >= until:
                del self.down_until[v]
                self.nodes[v] = self._boot(v)
                self.hw_seen[v] = 0
        for v, until in list(self.isolated.items()):
            if self.now >= until:
                del self.isolated[v]

    def heal(self) -> None:
        self.isolated.clear()
        for v in list(self.down_until):
            self.down_until[v] = self.now

    # -- clients ------------------------------------------------------------------------------------------
    def _propose(self) -> None:
        for v, n in self.nodes.items():
            if n is not None and n.role == LEADER:
                payload = ("p", self._next_payload)
                self._next_payload += 1
                offset = n.propose(payload)
                self.pending[payload] = (v, n.epoch, offset)

    def _ack(self) -> None:
        for payload, (v, epoch, offset) in list(self.pending.items()):
            n = self.nodes.get(v)
            if n is None or n.epoch != epoch or n.role != LEADER:
                del self.pending[payload]  # the client sees a failure (leader gone): not acknowledged
                continue
            if n.high_watermark > offset:
                assert history(n)[offset].payload == payload
                self.acked[payload] = offset
                del self.pending[payload]

    # -- invariants ---------------------------------------------------------------------------------------
    def _check(self) -> None:
        for v, n in self.nodes.items():
            if n is None:
                continue
            if n.role == LEADER:
                assert v in self.voters, f"seed {self.seed}: observer {v} leads"
                other = self.leaders.setdefault(n.epoch, v)
                assert other == v, f"seed {self.seed}: two leaders in epoch {n.epoch}: {other} and {v}"
            assert n.high_watermark >= self.hw_seen[v], f"seed {self.seed}: node {v} high watermark moved back"
            self.hw_seen[v] = n.high_watermark
            mine = history(n)
            common = min(len(mine), len(self.committed))
            assert mine[:common] == self.committed[:common], (
                f"seed {self.seed}: node {v} committed log differs from the committed history")
            if len(mine) > len(self.committed):
                self.committed.extend(mine[len(self.committed):])

    # -- driving ------------------------------------------------------------------------------------------
    def step(self) -> None:
        self.now += TICK_MS
        while self.queue and self.queue[0][0] <= self.now:
            _t, _s, src, dst, msg = heapq.heappop(self.queue)
            node = self.nodes.get(dst)
            if node is None or not self._reachable(src, dst) or (src, dst, type(msg)) in self.lost:
                self.stats["dropped"] += 1
                continue
            self.stats["delivered"] += 1
            self.persistent[dst].crash_chance = self.faults.crash_mid_install
            try:
                out = node.receive(msg, self.now)
            except Crash:
                self.nodes[dst] = None
                self.down_until[dst] = self.now + self.rng.randint(*self.faults.down_ms)
                self.stats["crashes_mid_install"] = self.stats.get("crashes_mid_install", 0) + 1
                continue
            if isinstance(msg, FetchSnapshotResponse) and msg.snapshot_id is not None:
                self.stats["snapshot_installs"] = self.stats.get("snapshot_installs", 0) + 1
            self._send(dst, out)
            self._check()
        for v, n in self.nodes.items():
            if n is not None:
                self._send(v, n.tick(self.now))
                every = self.faults.snapshot_every
                if every and n.high_watermark - n.log.start_offset >= every:
                    self.snapshots = getattr(self, "snapshots", 0) + 1
                    n.p.save_snapshot(n.high_watermark, n.log.epoch_at(n.high_watermark), tuple(history(n)))
                    self._check()
        if self.faults.propose_every_ms and self.rng.random() < TICK_MS / self.faults.propose_every_ms:
            self._propose()
        self._ack()
        self._check()

    def run(self, ms: int, faults: bool = True) -> None:
        end = self.now + ms
        while self.now < end:
            if faults:
                self._maybe_fault()
            self.step()

    def leader(self) -> RaftNode | None:
        leaders = [n for n in self.nodes.values() if n is not None and n.role == LEADER]
        return max(leaders, key=lambda n: n.epoch) if leaders else None

    def settle(self, ms: int = 15_000) -> RaftNode:
        """Heal every fault, let the quorum converge, commit one more proposal everywhere; the leader."""
        self.heal()
        quiet = Faults(drop=0.0, crash_every_ms=0, cut_every_ms=0, propose_every_ms=0)
        saved, self.faults = self.faults, quiet
        try:
            self._maybe_fault()  # restarts the crashed nodes
            deadline = self.now + ms
            while self.now < deadline:
                self.step()
                leader = self.leader()
                if leader is not None and leader.high_watermark == leader.log.end_offset and all(
                        n is not None and n.high_watermark == leader.log.end_offset for n in self.nodes.values()):
                    break
            leader = self.leader()
            assert leader is not None, f"seed {self.seed}: no leader after healing"
            payload = ("final", self.seed)
            offset = leader.propose(payload)
            self.pending[payload] = (leader.id, leader.epoch, offset)
            while self.now < deadline + ms and payload not in self.acked:
                self.step()
            assert payload in self.acked, f"seed {self.seed}: a proposal did not commit after healing"
            while self.now < deadline + 2 * ms and not all(
                    n is not None and n.high_watermark > offset for n in self.nodes.values()):
                self.step()
            assert all(n is not None and n.high_watermark > offset for n in self.nodes.values()), (
                f"seed {self.seed}: not every node committed the final proposal")
            return leader
        finally:
            self.faults = saved

    def check_acknowledged(self) -> None:
        """Every acknowledged proposal is committed, once, at the offset it was acknowledged at."""
        positions: dict[object, list[int]] = {}
        for i, e in enumerate(self.committed):
            positions.setdefault(e.payload, []).append(i)
        for payload, offset in self.acked.items():
            assert positions.get(payload) == [offset], (
                f"seed {self.seed}: acknowledged {payload} at {offset}, committed at {positions.get(payload)}")


def history(n: RaftNode) -> list[Entry]:
    """The node's committed log from offset 0: its snapshot's state (the entries it summarizes, in the
    simulation) and the committed entries after the log start."""
    snap = n.p.snapshot
    prefix: list[Entry] = []
    if n.log.start_offset > 0:
        assert snap is not None and snap[0] == n.log.start_offset, "a log start without its snapshot"
        prefix = list(snap[2])
        assert len(prefix) == snap[0]
    return prefix + n.committed()
