"""`python -m bench.metadata_startup` — start-up of the metadata state from a 50,000-record log: open the store and rebuild the image by
replaying every record (before) vs. open the store with a snapshot + short suffix and load the image
from the snapshot (after) — the work QuorumDriver/ClusterRuntime do at start-up."""
from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path

from minikafka.raft.store import FilePersistentState
from minikafka.raft.log import Entry, LEADER_CHANGE
from minikafka.metadata.image import MetadataImage

def run(changes: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="metadata-startup-"))
    N = 50_000
    recs = [Entry(1, LEADER_CHANGE)]
    recs.append(Entry(1, {"type": "RegisterBroker", "brokerId": 1, "brokerEpoch": 1, "incarnationId": "x",
                          "endpoints": [{"name": "PLAINTEXT", "host": "h", "port": 1}], "rack": None}))
    i = 0
    tids = []
    while len(recs) < N:
        if changes and len(tids) >= 100:  # ISR changes on 100 topics: the image stays small
            tid, name = tids[len(recs) % 100]
            recs.append(Entry(1, {"type": "PartitionChange", "topicId": tid, "partition": 0,
                                  "isr": [1] if len(recs) % 2 else [1]}))
            continue
        tid = uuid.uuid4().hex
        tids.append((tid, f"t{i}"))
        recs.append(Entry(1, {"type": "Topic", "name": f"t{i}", "topicId": tid}))
        recs.append(Entry(1, {"type": "Partition", "topicId": tid, "topic": f"t{i}", "partition": 0, "replicas": [1],
                              "isr": [1], "leader": 1, "leaderEpoch": 0, "partitionEpoch": 0}))
        i += 1
    recs = recs[:N]
    p = FilePersistentState(root); p.log.extend(recs); p.close()
    
    def replay():
        t = time.perf_counter(); p = FilePersistentState(root); img = MetadataImage()
        start = p.log.start_offset
        if p.snapshot is not None:
            img = MetadataImage.from_json(p.snapshot[2]["image"])
        for o in range(start, p.log.end_offset):
            img.apply(p.log.entry_at(o).payload, o)
        dt = time.perf_counter() - t; p.close(); return dt, len(img.topics)
    
    before = min(replay() for _ in range(3))
    # snapshot at N - 100 (what the running node would have), suffix of 100 entries
    p = FilePersistentState(root); img = MetadataImage()
    for o in range(p.log.end_offset - 100):
        img.apply(p.log.entry_at(o).payload, o)
    p.save_snapshot(N - 100, 1, {"clusterId": "c", "image": img.to_json()}); p.close()
    after = min(replay() for _ in range(3))
    print("ISR changes on 100 topics:" if changes else "every record a topic or partition:")
    print(f"before (replay {N} records): {before[0]*1000:.0f} ms, {before[1]} topics")
    print(f"after (snapshot + 100 records): {after[0]*1000:.0f} ms, {after[1]} topics")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    run(changes=False)
    run(changes=True)
