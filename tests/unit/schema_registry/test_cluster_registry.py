"""The pure parts of the registry on a cluster: ReplicatedLogStore over a real partition log (only committed
records are served; a leader commits and applies an earlier leader's tail before choosing an id, so ids are never
reused; a node that does not lead refuses to write), and write forwarding between two real REST listeners on
loopback (the follower's answer is the leader's, read back on the follower at once; Confluent's 50004 / 50003
when there is no leader or it cannot be reached; one hop only)."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

aiohttp = pytest.importorskip("aiohttp")

from minikafka.schema_registry import errors  # noqa: E402
from minikafka.schema_registry import records as r  # noqa: E402
from minikafka.schema_registry.forwarding import FORWARDED_HEADER, Forwarder  # noqa: E402
from minikafka.schema_registry.registry import SchemaRegistry  # noqa: E402
from minikafka.schema_registry.rest import RestServer  # noqa: E402
from minikafka.schema_registry.state import RegistryState  # noqa: E402
from minikafka.schema_registry.store import MemoryStore, ReplicatedLogStore, build_batch  # noqa: E402
from minikafka.storage import LogConfig, PartitionLog  # noqa: E402
from minikafka.testing import free_port  # noqa: E402


def schema(name: str) -> dict:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]})}


class Leadership:
    """The partition's leadership as the replica manager would report it; a commit moves the high watermark
    (every follower fetched) while this node leads."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.leads = True

    def leader_error(self) -> int:
        return 0 if self.leads else 6

    def leader_epoch(self) -> int:
        return 0

    async def wait_committed(self, end_offset: int, timeout_s: float) -> int:
        if not self.leads:
            return 6
        self.plog.update_high_watermark(end_offset)
        return 0


def test_replicated_store_serves_committed_records_and_never_reuses_ids(tmp_path: Path) -> None:
    async def scenario() -> None:
        plog = PartitionLog(tmp_path / "_schemas-0", LogConfig(), clean_shutdown=False)
        plog.replicated = True  # the high watermark is tracked apart from the log end, as on a cluster
        leadership = Leadership(plog)
        store = ReplicatedLogStore(lambda: plog, leadership)
        store.ready.set()
        await store.wait_ready(0)
        reg = SchemaRegistry(store)
        await reg.load()
        assert await reg.register("a-value", schema("A")) == {"id": 1}
        assert plog.high_watermark == plog.log_end_offset == 1

        # an earlier leader's record, in the log but not committed yet: not served
        value = r.schema_value("t-value", 1, 2, "AVRO", schema("T")["schema"], [], False)
        plog.append(build_batch([(r.schema_key("t-value", 1), value)], 0), leader_epoch=0)
        reg.refresh()
        assert reg.subjects() == ["a-value"] and 2 not in reg.state.ids

        # a write commits and applies it first: id 2 is taken, the new schema gets 3
        assert await reg.register("b-value", schema("B")) == {"id": 3}
        assert reg.subjects() == ["a-value", "b-value", "t-value"]

        # no longer the leader: nothing is written
        leadership.leads = False
        end = plog.log_end_offset
        with pytest.raises(errors.NotLeader):
            await reg.register("c-value", schema("C"))
        with pytest.raises(errors.NotLeader):
            await reg.set_config(None, {"compatibility": "NONE"})
        assert plog.log_end_offset == end

        # a node that replays the same log serves the same
        again = SchemaRegistry(ReplicatedLogStore(lambda: plog, leadership))
        again.store.plog = plog
        await again.load()
        assert again.state.subjects == reg.state.subjects and again.state.max_id == 3
        plog.close()

    asyncio.run(scenario())


class FollowerStore(MemoryStore):
    """A follower's store: the leader's records as they are replicated to it; it never writes."""

    def __init__(self, leader: MemoryStore) -> None:
        super().__init__()
        self.records = leader.records

    async def prepare_write(self, state: RegistryState) -> None:
        raise errors.NotLeader()


def test_forwarding_to_the_leader() -> None:
    async def scenario() -> None:
        leader_store = MemoryStore()
        leader = RestServer(SchemaRegistry(leader_store), "127.0.0.1", 0)
        leader_url = f"http://127.0.0.1:{await leader.start()}"
        current: dict[str, str | None] = {"url": leader_url}
        follower = RestServer(SchemaRegistry(FollowerStore(leader_store)), "127.0.0.1", 0,
                              forwarder=Forwarder(lambda: current["url"], timeout_s=1.0))
        base = f"http://127.0.0.1:{await follower.start()}"
        try:
            async with aiohttp.ClientSession() as http:
                async def call(method: str, path: str, body: object = None,
                               headers: dict | None = None) -> tuple[int, object]:
                    async with http.request(method, base + path, json=body, headers=headers) as resp:
                        return resp.status, await resp.json(content_type=None)

                assert await call("POST", "/subjects/s-value/versions", schema("S")) == (200, {"id": 1})
                assert (await call("GET", "/subjects/s-value/versions/1"))[1]["id"] == 1  # read here at once
                assert await call("PUT", "/config/s-value", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
                assert await call("GET", "/config/s-value") == (200, {"compatibilityLevel": "NONE"})
                status, body = await call("DELETE", "/subjects/nope")  # the leader's error, as it is
                assert (status, body["error_code"]) == (404, 40401)
                # a forwarded request reaching a node that does not lead: 50004, not forwarded again
                status, body = await call("POST", "/subjects/s-value/versions", schema("X"),
                                          headers={FORWARDED_HEADER: "1"})
                assert (status, body["error_code"]) == (500, 50004)
                current["url"] = None
                status, body = await call("POST", "/subjects/s-value/versions", schema("Y"))
                assert (status, body) == (500, {"error_code": 50004, "message": "Leader not known."})
                current["url"] = f"http://127.0.0.1:{free_port()}"  # nobody listens there
                status, body = await call("DELETE", "/subjects/s-value/versions/1")
                assert (status, body) == (500, {"error_code": 50003, "message": "Error while forwarding delete "
                                                "schema version request to the leader"})
                assert (await call("GET", "/subjects"))[1] == ["s-value"]  # reads need no leader
        finally:
            await follower.stop()
            await leader.stop()

    asyncio.run(scenario())
