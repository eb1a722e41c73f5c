"""The registry over a real `_schemas` partition log (schema_registry/store.py): what it appends replays
into the same state after the log is closed and opened again, and a compacted log says the same."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

from minikafka.schema_registry.registry import SchemaRegistry
from minikafka.schema_registry.store import LogStore
from minikafka.storage import LogConfig, PartitionLog


def schema(*fields: str) -> dict:
    return {"schema": json.dumps({"type": "record", "name": "R",
                                  "fields": [{"name": f, "type": "int", "default": 0} for f in fields]})}


def test_appends_replay_after_reopening(tmp_path: Path) -> None:
    async def scenario() -> None:
        plog = PartitionLog(tmp_path / "_schemas-0", LogConfig(), clean_shutdown=False)
        reg = SchemaRegistry(LogStore(plog))
        await reg.load()
        assert (await reg.register("s", schema("a"))) == {"id": 1}
        assert (await reg.register("s", schema("a", "b"))) == {"id": 2}
        await reg.set_config("s", {"compatibility": "FULL_TRANSITIVE"})
        await reg.delete_version("s", 1)
        assert plog.log_end_offset == 4
        plog.close()

        plog = PartitionLog(tmp_path / "_schemas-0", LogConfig(), clean_shutdown=True)
        again = SchemaRegistry(LogStore(plog))
        await again.load()
        assert again.state.subjects == reg.state.subjects
        assert again.versions("s") == [2] and again.versions("s", deleted=True) == [1, 2]
        assert again.get_config("s") == {"compatibilityLevel": "FULL_TRANSITIVE"}
        assert (await again.register("s", schema("a", "b", "c"))) == {"id": 3}
        assert again.version("s", "latest")["version"] == 3
        plog.close()

    asyncio.run(scenario())
