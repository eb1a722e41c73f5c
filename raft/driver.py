"""The metadata quorum of one node over the wire: a RaftNode (raft.py) over FilePersistentState in
`<log.dirs[0]>/__cluster_metadata-0/`, driven by the event loop.

* **Time.** A tick task calls `node.tick(now)` every TICK_S (monotonic ms); nothing busy-waits.
* **Outgoing.** Messages the core emits go to a per-peer sender task over a persistent connection to
  that voter's controller endpoint (peer.py); at most one request in flight per peer, and per peer only
  the newest message of each kind waits (an older Vote or Fetch is stale once a newer one exists). The
  answer (VoteResponse, FetchResponse) is fed back into the core; a failed request is a lost message.
* **Incoming.** The controller listener's handlers (broker/handlers/quorum.py) call `receive`; the
  core's answer to the requester is the RPC's response, anything else it emits is sent as above.
* **Cluster id** (issue 16): `cluster.id` if configured, else the id in this node's meta.properties,
  else agreed through the quorum: a leader whose log holds no ClusterId record proposes one (the
  configured/stored id, or a new random one) right after its epoch's LEADER_CHANGE entry; every node
  adopts the id once that entry is committed and writes it to meta.properties. RPCs carry the
  sender's known id and are refused with INCONSISTENT_CLUSTER_ID when both ids are known and differ.

Entry payloads are generic JSON values; metadata records are dicts with a "type" (only "ClusterId"
so far), so broker/topic records can be added without changing the log.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from minikafka.raft import wire
from minikafka.protocol.errors import INCONSISTENT_CLUSTER_ID
from minikafka.protocol.peer_client import PeerClient, PeerError
from minikafka.storage.partition_metadata import atomic_write
from minikafka.raft.core import (LEADER, BeginQuorumEpoch, EndQuorumEpoch, FetchRequest, FetchSnapshotRequest, FetchSnapshotResponse,
                   Message, RaftConfig, RaftNode, VoteRequest)
from minikafka.raft.store import FilePersistentState, load_snapshot, snapshot_name, write_snapshot

if TYPE_CHECKING:
    from minikafka.raft.config import QuorumConfig

# connect(node id, (host, port), client id, request timeout s, retry backoff s, max backoff s): a client of a
# voter's controller listener; the broker passes one that speaks the listener's TLS and SASL
Connect = Callable[..., PeerClient]


def plain_connect(node_id: int, address: tuple[str, int], client_id: str, request_timeout_s: float,
                  retry_backoff_s: float = 0.02, max_backoff_s: float = 1.0) -> PeerClient:
    """A PLAINTEXT controller client (the default of `QuorumDriver`)."""
    return PeerClient(node_id, address[0], address[1], client_id, request_timeout_s, retry_backoff_s, max_backoff_s)

log = logging.getLogger(__name__)

TICK_S = 0.01  # the shortest pause between two ticks
MAX_SLEEP_S = 0.5  # the longest
STOP_WAIT_S = 1.0
FETCH_MAX_WAIT_MS = 500
METADATA_DIR = "__cluster_metadata-0"
CLUSTER_ID_RECORD = "ClusterId"


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class QuorumDriver:
    def __init__(self, node_id: int, quorum: "QuorumConfig", log_dir: Path, cluster_id: str | None,
                 on_cluster_id=None, connect: Connect | None = None) -> None:
        self.id = node_id
        self.quorum = quorum
        self.cluster_id = cluster_id
        self._log_dir = log_dir
        self._on_cluster_id = on_cluster_id
        self.persistent = FilePersistentState(log_dir / METADATA_DIR)
        config = RaftConfig(fetch_timeout_ms=quorum.fetch_timeout_ms, election_timeout_ms=quorum.election_timeout_ms,
                            election_backoff_max_ms=quorum.election_backoff_max_ms)
        # KIP-853: the bootstrap servers are peers -2, -3, ... (as Kafka's), asked while no voter is known
        self._bootstrap = {-2 - i: addr for i, addr in enumerate(quorum.bootstrap_servers)}
        self._learned: dict[int, tuple[str, int]] = {}  # a leader's endpoint from a Fetch answer's NodeEndpoints
        self.node = RaftNode(node_id, tuple(quorum.voters), self.persistent, config, random.Random(), _now_ms(),
                             bootstrap=tuple(self._bootstrap))
        # followers long-poll (Kafka's raft fetches wait up to 500 ms); well inside the fetch timeout
        self.fetch_max_wait_ms = min(FETCH_MAX_WAIT_MS, quorum.fetch_timeout_ms // 4,
                                     quorum.request_timeout_ms // 2)
        # connections to the other voters' controller listeners (their TLS and SASL are the caller's business)
        self.connect = connect or plain_connect
        self.peers: dict[int, PeerClient] = {}
        self._peer_addr: dict[int, tuple[str, int]] = {}
        self._admin_clients: dict[int, PeerClient] = {}  # forward()
        self._pending: dict[int, dict[type, Message]] = {}
        self._wakeup: dict[int, asyncio.Event] = {}
        self._tasks: list[asyncio.Task] = []
        self._started = False
        for v in [*quorum.voters, *self.node.voters, *self._bootstrap]:
            if v != node_id:
                self._ensure_peer(v)
        self._stopped = False
        self._voter_change_pending = False  # an AddRaftVoter / RemoveRaftVoter in progress (one at a time)
        # KIP-853: this controller's listeners ({"name", "host", "port"}; set by the broker); a voter whose
        # VotersRecord entry differs sends UpdateRaftVoter to the leader, once per epoch
        self.own_endpoints: list[dict] | None = None
        self.directory_id: str | None = None  # this node's metadata log dir id (a dynamic quorum: Fetch v17)
        self.replica_directories: dict[int, str] = {}  # leader: the directory id each fetching replica sent
        self._update_sent_epoch = -1
        self._update_next = 0.0  # monotonic s: no UpdateRaftVoter before (one in flight: inf; failed: a retry later)
        # KAFKA-16538: at kraft.version 0 every voter still tells the leader (UpdateRaftVoter) its directory id,
        # endpoints and supported kraft.version range; the leader keeps them in memory for this epoch: what an
        # upgrade to kraft.version 1 writes into the VotersRecord
        self.static_voter_info: dict[int, dict] = {}
        self._static_info_epoch = -1
        self._refused_by: set[int] = set()  # peers that answered INCONSISTENT_CLUSTER_ID (logged once each)
        self._applied = 0
        self._last_role = (None, -1)
        self._poke = asyncio.Event()  # set after every step of the core: the tick loop looks again
        self._changed: asyncio.Future | None = None  # resolved when the log end, HW, epoch or role changes
        self._seen: tuple = ()
        self._checked_epoch = -1  # the epoch in which this node (as leader) made sure a ClusterId record exists
        # leader's view for DescribeQuorum: voter -> (log end offset, last fetch wall ms, last caught-up wall ms)
        self.follower_state: dict[int, tuple[int, int, int]] = {}
        # leader: the high watermark each follower was last answered (a fetch with nothing newer long-polls)
        self.told_high_watermark: dict[int, int] = {}
        # cluster metadata (issue 16): `on_commit([(offset, payload), ...])` gets every committed entry once,
        # in order; each of `step_listeners` runs after every step of the core (role, epoch, commit changes)
        self.on_commit: Callable[[list[tuple[int, Any]]], None] | None = None
        self.step_listeners: list[Callable[[], None]] = []
        self._in_step = False
        # snapshots (KIP-630): `snapshot_state()` returns a function (run in a worker thread) giving the
        # committed state as of the last entry applied as JSON-able data; `on_snapshot(offset, data)`
        # replaces that state by a snapshot's (at start-up, or a snapshot installed from the leader)
        self.snapshot_state: Callable[[], Callable[[], Any]] | None = None
        self.on_snapshot: Callable[[int, Any], None] | None = None
        self._snapshot_task: asyncio.Task | None = None
        self._last_snapshot_ms = _now_ms()
        self.snapshots_taken = 0

    # -- life cycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        self._tasks.append(asyncio.create_task(self._tick_loop(), name="quorum-tick"))
        for v in self.peers:
            self._tasks.append(asyncio.create_task(self._sender(v), name=f"quorum-peer-{v}"))
        log.info("metadata quorum: node %d of voters %s (kraft.version %d), epoch %d, log end %d", self.id,
                 ",".join(map(str, self.node.voters)) or "(none known yet)", self.node.kraft_version,
                 self.node.epoch, self.node.log.end_offset)

    # -- endpoints (KIP-853: a dynamic quorum's voters come and go) ------------------------------------
    def endpoint(self, v: int) -> tuple[str, int] | None:
        """The controller endpoint of node v: its VotersRecord entry, the static voters, what a leader's
        Fetch answer said, or (v < 0) a bootstrap server."""
        record = self.node.voter_nodes.get(v)
        if record is not None:
            names = self.quorum.controller_listener_names
            for ep in record.get("endpoints") or ():
                if not names or ep.get("name") == names[0]:
                    return ep["host"], int(ep["port"])
        if v in self.quorum.voters:
            return self.quorum.voters[v]
        return self._learned.get(v) or self._bootstrap.get(v)

    def voter_endpoints(self) -> dict[int, tuple[str, int]]:
        """The current voters' controller endpoints (those known)."""
        out = {}
        for v in self.node.voters:
            ep = self.endpoint(v)
            if ep is not None:
                out[v] = ep
        return out

    def _ensure_peer(self, v: int) -> bool:
        addr = self.endpoint(v)
        if v in self.peers:
            if addr is not None and addr != self._peer_addr.get(v):  # its VotersRecord entry changed (KIP-853)
                self.peers[v].close()
                self.peers[v] = self.connect(v, addr, f"raft-client-{self.id}", self.quorum.request_timeout_ms / 1000,
                                             self.quorum.retry_backoff_ms / 1000)
                self._peer_addr[v] = addr
                old = self._admin_clients.pop(v, None)
                if old is not None:
                    old.close()
            return True
        if addr is None or v == self.id:
            return False
        self.peers[v] = self.connect(v, addr, f"raft-client-{self.id}", self.quorum.request_timeout_ms / 1000,
                                     self.quorum.retry_backoff_ms / 1000)
        self._peer_addr[v] = addr
        self._pending[v] = {}
        self._wakeup[v] = asyncio.Event()
        if self._started and not self._stopped:
            self._tasks.append(asyncio.create_task(self._sender(v), name=f"quorum-peer-{v}"))
        return True

    async def stop(self, resign_timeout_s: float = 1.0) -> None:
        """Resign if leader (EndQuorumEpoch to the others, waited for at most `resign_timeout_s`),
        stop the tasks, close the log."""
        out = self.node.resign(_now_ms())
        if out:
            log.info("metadata quorum: resigning leadership of epoch %d", self.node.epoch)
            sends = [self._send_end(dst, msg) for dst, msg in out if isinstance(msg, EndQuorumEpoch)]
            await asyncio.wait([asyncio.ensure_future(s) for s in sends], timeout=resign_timeout_s)
        self._stopped = True  # the loops end on their own too (a cancellation can be lost, gh-86296)
        self._poke.set()
        for event in self._wakeup.values():
            event.set()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            _done, stuck = await asyncio.wait(self._tasks, timeout=STOP_WAIT_S)
            if stuck:
                log.warning("metadata quorum: %d task(s) did not stop within %.0f s", len(stuck), STOP_WAIT_S)
        for peer in [*self.peers.values(), *self._admin_clients.values()]:
            peer.close()
        self.persistent.close()

    # -- the core -------------------------------------------------------------------------------------
    def receive(self, msg: Message, reply_type: type | None = None) -> Message | None:
        """Feed `msg` to the core; the core's message of `reply_type` to the sender (the RPC's answer),
        the rest sent to the peers."""
        out = self.node.receive(msg, _now_ms())
        reply = None
        sender = getattr(msg, "candidate", None) if isinstance(msg, VoteRequest) else getattr(msg, "replica", None)
        rest = []
        for dst, m in out:
            if reply is None and reply_type is not None and isinstance(m, reply_type) and dst == sender:
                reply = m
            else:
                rest.append((dst, m))
        if isinstance(msg, FetchRequest) and reply is not None and self.node.role == LEADER:
            wall = int(time.time() * 1000)
            caught_up = msg.fetch_offset >= self.node.log.end_offset
            prev = self.follower_state.get(msg.replica, (-1, -1, -1))
            self.follower_state[msg.replica] = (msg.fetch_offset, wall, wall if caught_up else prev[2])
        self._dispatch(rest)
        self._after_step()
        return reply

    def _dispatch(self, out: list[tuple[int, Message]]) -> None:
        for dst, msg in out:
            if self._ensure_peer(dst):
                self._pending[dst][type(msg)] = msg
                self._wakeup[dst].set()

    def _after_step(self) -> None:
        node = self.node
        role = (node.role, node.epoch)
        if role != self._last_role:
            self._last_role = role
            log.info("metadata quorum: node %d is %s in epoch %d (leader %s)", self.id, node.role, node.epoch,
                     node.leader)
            if node.role == LEADER:
                self.follower_state = {}
                self.told_high_watermark = {}
        if node.role == LEADER and self._checked_epoch != node.epoch:
            self._checked_epoch = node.epoch
            snap = self.persistent.snapshot
            if not any(_is_cluster_id(e.payload) for e in node.log.entries) and not (
                    snap is not None and isinstance(snap[2], dict) and snap[2].get("clusterId")):
                node.propose({"type": CLUSTER_ID_RECORD, "clusterId": self.cluster_id or _new_cluster_id()})
        self._apply_committed()
        self._poke.set()
        seen = (node.log.end_offset, node.high_watermark, node.epoch, node.role)
        if seen != self._seen:
            self._seen = seen
            if self._changed is not None and not self._changed.done():
                self._changed.set_result(None)
            self._changed = None
        self._maybe_update_voter()
        if self.step_listeners and not self._in_step:
            self._in_step = True
            try:
                for listener in self.step_listeners:
                    try:
                        listener()
                    except Exception:
                        log.exception("metadata quorum: step listener failed")
            finally:
                self._in_step = False

    def propose(self, payloads: list[Any]) -> list[int] | None:
        """Leader only: append `payloads` to the log (offsets in order), or None if not the leader."""
        offsets = []
        for payload in payloads:
            offset = self.node.propose(payload)
            if offset is None:
                return None
            offsets.append(offset)
        self._after_step()
        return offsets

    async def wait_for_change(self, timeout_s: float) -> bool:
        """Wait until the log end, high watermark, epoch or role changes (True) or `timeout_s` passes."""
        if self._changed is None:
            self._changed = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._changed), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    def _apply_committed(self) -> None:
        node = self.node
        log_ = node.log
        if self._applied < log_.start_offset:
            self._load_snapshot()
        start = self._applied
        while self._applied < node.high_watermark:
            payload = log_.entry_at(self._applied).payload
            self._applied += 1
            if _is_cluster_id(payload):
                self._agree_cluster_id(payload["clusterId"])
        if self.on_commit is not None and self._applied > start:
            try:
                self.on_commit([(o, log_.entry_at(o).payload) for o in range(start, self._applied)])
            except Exception:
                log.exception("metadata quorum: applying committed entries %d..%d failed", start, self._applied - 1)
        self._maybe_snapshot()

    def _agree_cluster_id(self, agreed: str | None) -> None:
        if not agreed:
            return
        if self.cluster_id is None:
            self.cluster_id = agreed
            log.info("metadata quorum: cluster id %s agreed", agreed)
            if self._on_cluster_id is not None:
                self._on_cluster_id(agreed)
        elif agreed != self.cluster_id:
            log.error("metadata quorum: the quorum's cluster id is %s but this node's is %s", agreed,
                      self.cluster_id)

    def _load_snapshot(self) -> None:
        """The state at the log start comes from the snapshot (start-up, or one installed from the leader)."""
        snap = self.persistent.snapshot
        offset = self.node.log.start_offset
        if snap is None or snap[0] != offset:
            raise AssertionError(f"the log starts at {offset} without a snapshot there")
        state = snap[2] if isinstance(snap[2], dict) else {}
        self._agree_cluster_id(state.get("clusterId"))
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(offset, state.get("image"))
            except Exception:
                log.exception("metadata quorum: loading the snapshot at %d failed", offset)
        log.info("metadata quorum: state at offset %d loaded from the snapshot (epoch %d)", offset, snap[1])
        self._applied = offset

    def _maybe_snapshot(self) -> None:
        """Every `snapshot_max_bytes` of log (or `snapshot_interval_ms`) past the log start, snapshot the
        applied (committed) state: serialized and written in a worker thread, then the prefix dropped."""
        log_ = self.node.log
        offset = self._applied
        if (self.snapshot_state is None or offset <= log_.start_offset or self._stopped
                or (self._snapshot_task is not None and not self._snapshot_task.done())):
            return
        size = log_.bytes_between(log_.start_offset, offset) if hasattr(log_, "bytes_between") else 0
        if size < self.quorum.snapshot_max_bytes and _now_ms() - self._last_snapshot_ms < self.quorum.snapshot_interval_ms:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._last_snapshot_ms = _now_ms()
        epoch = log_.epoch_at(offset)
        image_fn, cluster_id = self.snapshot_state(), self.cluster_id
        voters = self.node.voter_records_at(offset)  # KIP-853: the voter set travels in the snapshot
        self._snapshot_task = loop.create_task(self._snapshot(offset, epoch, image_fn, cluster_id, voters),
                                               name="quorum-snapshot")

    async def _snapshot(self, offset: int, epoch: int, image_fn: Callable[[], Any], cluster_id: str | None,
                        voters: list[dict] | None = None) -> None:
        directory = self.persistent.directory

        def build() -> Any:
            state = {"clusterId": cluster_id, "image": image_fn()}
            if voters is not None:
                state.update(voters=voters, kraftVersion=1)
            write_snapshot(directory, offset, epoch, state)
            return state
        try:
            state = await asyncio.to_thread(build)
        except Exception:
            log.exception("metadata quorum: writing the snapshot at %d failed", offset)
            return
        log_ = self.node.log
        if self._stopped or not (log_.start_offset < offset <= log_.end_offset and log_.epoch_at(offset) == epoch):
            (directory / snapshot_name(offset, epoch)).unlink(missing_ok=True)  # overtaken (an install)
            return
        self.persistent.save_snapshot(offset, epoch, state)
        self.snapshots_taken += 1
        log.info("metadata quorum: snapshot at offset %d (epoch %d) taken, log now starts there", offset, epoch)

    def read_snapshot_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                            ) -> tuple[int, bytes] | None:
        """(file size, bytes from `position`) of a snapshot file, None if it is gone (worker thread)."""
        try:
            with open(self.persistent.directory / snapshot_name(*snapshot_id), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(position)
                return size, f.read(max_bytes)
        except FileNotFoundError:
            return None

    async def _download_snapshot(self, v: int, msg: FetchSnapshotRequest) -> FetchSnapshotResponse:
        """The leader's snapshot file, chunk by chunk; checked and written (atomically) in a worker thread
        before the core installs it."""
        from minikafka.protocol.messages import FetchSnapshotResponse as KResp
        data, position = bytearray(), 0
        while True:
            resp = await self.peers[v].request(wire.fetch_snapshot_request(msg, self.cluster_id, position),
                                               wire.FETCH_SNAPSHOT_VERSION, KResp)
            part = wire.from_fetch_snapshot_response(resp)
            if part is None:
                return FetchSnapshotResponse(msg.epoch, v)
            error, epoch, leader, size, pos, chunk = part
            if error in wire.FENCING_ERRORS:
                return FetchSnapshotResponse(epoch, leader, fenced=True)
            if error != 0 or pos != position:
                return FetchSnapshotResponse(epoch, leader)  # gone: fetch again, maybe a newer one
            data += chunk
            position += len(chunk)
            if position >= size or not chunk:
                break
        directory, blob = self.persistent.directory, bytes(data)

        def check_and_write() -> Any:
            path = directory / snapshot_name(*msg.snapshot_id)
            tmp = directory / (path.name + ".download")
            tmp.write_bytes(blob)
            try:
                state = load_snapshot(tmp)
            finally:
                tmp.unlink()
            atomic_write(path, blob)
            return state
        try:
            state = await asyncio.to_thread(check_and_write)
        except ValueError as exc:
            log.warning("metadata quorum: snapshot %s from node %d does not check: %s", msg.snapshot_id, v, exc)
            return FetchSnapshotResponse(epoch, leader)
        log.info("metadata quorum: snapshot at offset %d (epoch %d, %d bytes) fetched from node %d",
                 msg.snapshot_id[0], msg.snapshot_id[1], len(blob), v)
        return FetchSnapshotResponse(epoch, leader, msg.snapshot_id, state)

    async def _tick_loop(self) -> None:
        """Tick the core when it has something to do (`next_wakeup`), or after any step that may have
        changed that (`_poke`); never more often than every TICK_S, at least every MAX_SLEEP_S."""
        while not self._stopped:
            try:
                self._dispatch(self.node.tick(_now_ms()))
                self._after_step()
                delay = (self.node.next_wakeup() - _now_ms()) / 1000
            except Exception:
                log.exception("metadata quorum: tick failed")
                delay = TICK_S
            self._poke.clear()
            await asyncio.sleep(TICK_S)
            delay = min(MAX_SLEEP_S, delay - TICK_S)
            if delay > 0 and not self._poke.is_set():
                try:
                    await asyncio.wait_for(self._poke.wait(), delay)
                except asyncio.TimeoutError:
                    pass

    # -- peers ----------------------------------------------------------------------------------------
    async def _sender(self, v: int) -> None:
        pending, wakeup = self._pending[v], self._wakeup[v]
        while not self._stopped:
            await wakeup.wait()
            wakeup.clear()
            while pending and not self._stopped:
                kind = next(iter(pending))
                msg = pending.pop(kind)
                try:
                    await self._send(v, msg)
                except PeerError as exc:
                    log.debug("metadata quorum: %s to node %d lost: %s", type(msg).__name__, v, exc)
                    if isinstance(msg, (FetchRequest, FetchSnapshotRequest)) and msg.epoch == self.node.epoch:
                        self.node.fetch_failed(_now_ms())  # fetch again soon; the fetch timeout runs on
                        self._poke.set()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("metadata quorum: sending %s to node %d failed", type(msg).__name__, v)

    async def _send(self, v: int, msg: Message) -> None:
        from minikafka.protocol import messages as m
        peer = self.peers[v]
        if isinstance(msg, VoteRequest):
            resp = await peer.request(wire.vote_request(msg, v, self.cluster_id), wire.VOTE_VERSION, m.VoteResponse)
            answer: Message | None = wire.from_vote_response(resp, v, msg.pre_vote)
        elif isinstance(msg, FetchRequest):
            from kafka.protocol.consumer import FetchResponse as KFetchResponse
            resp = await peer.request(wire.fetch_request(msg, self.cluster_id, self.fetch_max_wait_ms,
                                                         self.directory_id),
                                      17 if self.directory_id else wire.FETCH_VERSION, KFetchResponse)
            answer = wire.from_fetch_response(resp, msg.fetch_offset, msg.fetch_id)
            for ep in getattr(resp, "node_endpoints", None) or ():
                if ep.node_id >= 0 and ep.node_id != self.id:
                    self._learned[ep.node_id] = (ep.host, ep.port)
        elif isinstance(msg, FetchSnapshotRequest):
            snap = await self._download_snapshot(v, msg)
            self._dispatch(self.node.receive(snap, _now_ms()))
            self._after_step()
            return
        elif isinstance(msg, BeginQuorumEpoch):
            await peer.request(wire.begin_request(msg, v, self.cluster_id), wire.BEGIN_VERSION,
                               m.BeginQuorumEpochResponse)
            return
        elif isinstance(msg, EndQuorumEpoch):
            await self._send_end(v, msg)
            return
        else:  # VoteResponse/FetchResponse are answers, never sent on their own
            return
        if resp.error_code == INCONSISTENT_CLUSTER_ID and v not in self._refused_by:
            self._refused_by.add(v)
            log.error("metadata quorum: node %d refuses this node's requests: it belongs to another cluster "
                      "(this node's cluster id: %s)", v, self.cluster_id)
        if answer is not None:
            self._dispatch(self.node.receive(answer, _now_ms()))
            self._after_step()

    async def _send_end(self, v: int, msg: EndQuorumEpoch) -> None:
        from minikafka.protocol import messages as m
        try:
            await self.peers[v].request(wire.end_request(msg, self.cluster_id), wire.END_VERSION,
                                        m.EndQuorumEpochResponse)
        except PeerError:
            pass

    async def forward(self, v: int, req: Any, version: int, response_class: type) -> Any:
        """`req` sent to voter v's controller listener (admin requests; own connection per voter, so
        that the quorum's traffic never waits behind them); raises PeerError."""
        client = self._admin_clients.get(v)
        if client is None:
            address = self.endpoint(v)
            if address is None:
                raise PeerError(f"no endpoint known for controller {v}")
            client = self._admin_clients[v] = self.connect(
                v, address, f"forward-{self.id}", self.quorum.request_timeout_ms / 1000)
        resp = await client.request(req, version, response_class)
        resp._header = None  # answered again under the caller's own header
        return resp

    # -- voter changes (KIP-853: AddRaftVoter / RemoveRaftVoter, handled by the leader) ----------------
    def _voter_change_precheck(self, what: str) -> tuple[int, str | None] | None:
        """Kafka's checks before any voter change, in its order; None when the change may go ahead."""
        from minikafka.protocol.errors import NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, UNSUPPORTED_VERSION
        node = self.node
        if node.role != LEADER:
            return NOT_LEADER_OR_FOLLOWER, None
        if self._voter_change_pending:
            return REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request"
        if node.high_watermark <= node._epoch_start:
            return REQUEST_TIMED_OUT, ("Request timed out waiting for leader to establish HWM and fence previous "
                                       "voter changes")
        if node.kraft_version < 1:
            return UNSUPPORTED_VERSION, (f"Cluster doesn't support {what} voter because the kraft.version feature "
                                         f"is {node.kraft_version}")
        if node.voters_offset >= node.high_watermark:
            return REQUEST_TIMED_OUT, ("Request timed out waiting for voters to commit the latest voter change at "
                                       f"Optional[{node.voters_offset}] with HWM {node.high_watermark}")
        return None

    def _replica_caught_up(self, v: int, directory_id: str | None = None) -> bool:
        """Kafka's isReplicaCaughtUp: the replica (that id with that directory id, when it sent one) fetched
        up to the leader's end within the fetch timeout."""
        if directory_id is not None and self.replica_directories.get(v, directory_id) != directory_id:
            return False
        _end, _fetched, caught_up = self.follower_state.get(v, (-1, -1, -1))
        return caught_up >= 0 and int(time.time() * 1000) - caught_up <= self.quorum.fetch_timeout_ms

    async def add_voter(self, voter_id: int, directory_id: str, endpoints: list[dict],
                        timeout_s: float) -> tuple[int, str | None]:
        """(error code, message) of adding a voter: the VotersRecord with it appended once it is caught
        up, answered when committed (REQUEST_TIMED_OUT if not within `timeout_s`)."""
        from minikafka.protocol.errors import DUPLICATE_VOTER, REQUEST_TIMED_OUT
        failed = self._voter_change_precheck("adding")
        if failed is not None:
            return failed
        node = self.node
        if voter_id in node.voters:
            keys = ", ".join(f"ReplicaKey(id={v}, directoryId=Optional[{r.get('voterDirectoryId')}])"
                             for v, r in sorted(node.voter_nodes.items()))
            return DUPLICATE_VOTER, (f"The voter id for ReplicaKey(id={voter_id}, directoryId=Optional[{directory_id}])"
                                     f" is already part of the set of voters [{keys}].")
        self._voter_change_pending = True
        try:
            deadline = time.monotonic() + timeout_s
            wait_until = time.monotonic() + min(timeout_s, self.quorum.fetch_timeout_ms / 1000)
            while not self._replica_caught_up(voter_id, directory_id):
                left = wait_until - time.monotonic()
                if left <= 0 or node.role != LEADER:
                    return REQUEST_TIMED_OUT, (f"Aborted add voter operation for ReplicaKey(id={voter_id}, "
                                               f"directoryId=Optional[{directory_id}]) since it is lagging behind")
                await self.wait_for_change(min(left, 0.1))
            entry = {"voterId": voter_id, "voterDirectoryId": directory_id, "endpoints": endpoints,
                     "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}
            return await self._append_voters([*node.voter_nodes.values(), entry], deadline)
        finally:
            self._voter_change_pending = False

    async def remove_voter(self, voter_id: int, directory_id: str | None, timeout_s: float) -> tuple[int, str | None]:
        from minikafka.protocol.errors import VOTER_NOT_FOUND
        failed = self._voter_change_precheck("removing")
        if failed is not None:
            return failed
        node = self.node
        record = node.voter_nodes.get(voter_id)
        if record is None or (directory_id is not None and record.get("voterDirectoryId") != directory_id):
            keys = ", ".join(f"ReplicaKey(id={v}, directoryId=Optional[{r.get('voterDirectoryId')}])"
                             for v, r in sorted(node.voter_nodes.items()))
            return VOTER_NOT_FOUND, (f"Cannot remove voter ReplicaKey(id={voter_id}, "
                                     f"directoryId=Optional[{directory_id}]) from the set of voters [{keys}]")
        self._voter_change_pending = True
        try:
            rest = [r for v, r in node.voter_nodes.items() if v != voter_id]
            return await self._append_voters(rest, time.monotonic() + timeout_s)
        finally:
            self._voter_change_pending = False

    def update_voter(self, voter_id: int, directory_id: str, endpoints: list[dict],
                     kraft_range: tuple[int, int]) -> int:
        """UpdateRaftVoter on the leader (Kafka's UpdateVoterHandler): the voter's entry (same id and
        directory id) gets the new endpoints and kraft.version range; answered once appended."""
        from minikafka.protocol.errors import (INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
                                               VOTER_NOT_FOUND)
        from minikafka.raft.core import voters_record
        node = self.node
        if self._voter_change_pending or node.high_watermark <= node._epoch_start:
            return REQUEST_TIMED_OUT
        if node.kraft_version < 1:  # KAFKA-16538: a static voter's information, kept for kraft.version 1
            if voter_id not in node.voters:
                return VOTER_NOT_FOUND
            if not kraft_range[0] <= node.kraft_version <= kraft_range[1]:
                return INVALID_REQUEST
            self.static_info()[voter_id] = {
                "voterId": voter_id, "voterDirectoryId": directory_id, "endpoints": endpoints,
                "kRaftVersionFeature": {"minSupportedVersion": kraft_range[0], "maxSupportedVersion": kraft_range[1]}}
            log.info("metadata quorum: voter %d (directory %s) supports kraft.version %d-%d", voter_id, directory_id,
                     *kraft_range)
            return 0
        if node.voters_offset >= node.high_watermark:
            return REQUEST_TIMED_OUT
        if not kraft_range[0] <= node.kraft_version <= kraft_range[1]:
            return INVALID_REQUEST
        record = node.voter_nodes.get(voter_id)
        if record is None or record.get("voterDirectoryId") != directory_id:
            return VOTER_NOT_FOUND
        updated = {**record, "endpoints": endpoints,
                   "kRaftVersionFeature": {"minSupportedVersion": kraft_range[0], "maxSupportedVersion": kraft_range[1]}}
        if self.propose([voters_record([updated if v == voter_id else r for v, r in node.voter_nodes.items()])]) is None:
            return NOT_LEADER_OR_FOLLOWER
        log.info("metadata quorum: voter %d's endpoints updated to %s", voter_id, endpoints)
        return 0

    def own_directory_id(self) -> str | None:
        """This node's metadata log dir id (meta.properties' directory.id; a static quorum's node writes it once
        the cluster id is agreed)."""
        if self.directory_id:
            return self.directory_id
        try:
            for line in (self._log_dir / "meta.properties").read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip() == "directory.id":
                    return value.strip() or None
        except OSError:
            return None
        return None

    def own_voter_entry(self, directory: str) -> dict:
        return {"voterId": self.id, "voterDirectoryId": directory, "endpoints": list(self.own_endpoints or ()),
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}

    def _maybe_update_static_voter(self) -> None:
        """kraft.version 0 (KAFKA-16538): a follower voter sends UpdateRaftVoter once per epoch with its
        directory id, endpoints and kraft.version 0-1, so that the leader may upgrade to kraft.version 1."""
        node = self.node
        if (self.id not in node.voters or self.own_endpoints is None or node.role != "follower"
                or node.leader is None or not self._started or self._stopped
                or (self._update_sent_epoch == node.epoch and time.monotonic() < self._update_next)):
            return
        directory = self.own_directory_id()
        if directory is None:
            return
        self._update_sent_epoch, self._update_next = node.epoch, float("inf")
        self._tasks.append(asyncio.ensure_future(self._send_update_voter(node.leader, node.epoch,
                                                                         self.own_voter_entry(directory))))

    def static_info(self) -> dict[int, dict]:
        """Leader, kraft.version 0: what each voter told it in this epoch (UpdateRaftVoter), by voter id."""
        if self._static_info_epoch != self.node.epoch:
            self.static_voter_info, self._static_info_epoch = {}, self.node.epoch
        return self.static_voter_info

    def _maybe_update_voter(self) -> None:
        """A follower voter whose entry in the voter set names other endpoints than its own listeners
        tells the leader (UpdateRaftVoter), once per epoch, as Kafka's voters do after a restart."""
        node = self.node
        if node.kraft_version < 1:
            self._maybe_update_static_voter()
            return
        mine = node.voter_nodes.get(self.id)
        if (mine is None or self.own_endpoints is None or node.role != "follower" or node.leader is None
                or (self._update_sent_epoch == node.epoch and time.monotonic() < self._update_next)
                or not self._started or self._stopped):
            return
        key = lambda eps: sorted((e["name"], e["host"], int(e["port"])) for e in eps)  # noqa: E731
        if key(mine.get("endpoints") or ()) == key(self.own_endpoints):
            return
        self._update_sent_epoch, self._update_next = node.epoch, float("inf")
        self._tasks.append(asyncio.ensure_future(self._send_update_voter(node.leader, node.epoch, mine)))

    async def _send_update_voter(self, leader: int, epoch: int, mine: dict) -> None:
        import base64
        import uuid
        from minikafka.protocol.messages import UpdateRaftVoterRequest as Req, UpdateRaftVoterResponse as Resp
        directory = mine["voterDirectoryId"]
        req = Req(cluster_id=self.cluster_id, current_leader_epoch=epoch, voter_id=self.id,
                  voter_directory_id=uuid.UUID(bytes=base64.urlsafe_b64decode(directory + "=" * (-len(directory) % 4))),
                  listeners=[Req.Listener(name=e["name"], host=e["host"], port=int(e["port"]))
                             for e in self.own_endpoints or ()],
                  k_raft_version_feature=Req.KRaftVersionFeature(min_supported_version=0, max_supported_version=1))
        try:
            resp = await self.forward(leader, req, 0, Resp)
            log.info("metadata quorum: UpdateRaftVoter to leader %d answered error %d", leader, resp.error_code)
            if resp.error_code != 0:
                self._update_next = time.monotonic() + 1.0
        except PeerError as exc:
            log.info("metadata quorum: UpdateRaftVoter to leader %d failed: %s", leader, exc)
            self._update_next = time.monotonic() + 1.0

    async def _append_voters(self, voters: list[dict], deadline: float) -> tuple[int, str | None]:
        from minikafka.protocol.errors import NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT
        from minikafka.raft.core import voters_record
        node = self.node
        offsets = self.propose([voters_record(voters)])
        if offsets is None:
            return NOT_LEADER_OR_FOLLOWER, None
        epoch = node.epoch
        log.info("metadata quorum: voters %s appended at offset %d", sorted(v["voterId"] for v in voters),
                 offsets[0])
        while node.high_watermark <= offsets[0]:
            left = deadline - time.monotonic()
            if node.epoch != epoch or node.role != LEADER:
                return NOT_LEADER_OR_FOLLOWER, None
            if left <= 0:
                return REQUEST_TIMED_OUT, None
            await self.wait_for_change(min(left, 0.2))
        return 0, None

    # -- views ----------------------------------------------------------------------------------------
    def cluster_id_conflicts(self, theirs: str | None) -> bool:
        return bool(theirs) and self.cluster_id is not None and theirs != self.cluster_id

    def status(self) -> dict[str, Any]:
        n = self.node
        return {"node": self.id, "role": n.role, "epoch": n.epoch, "leader": n.leader,
                "high_watermark": n.high_watermark, "log_end_offset": n.log.end_offset}


def _is_cluster_id(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("type") == CLUSTER_ID_RECORD


def _new_cluster_id() -> str:
    from minikafka.raft.config import new_cluster_id
    return new_cluster_id()


__all__ = ["QuorumDriver"]
