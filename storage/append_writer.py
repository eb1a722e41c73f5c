"""One writer thread per log directory: the file writes of appends, off the owner (event-loop) thread.

Invariant: a log directory's writes run one at a time in submission order (a single-thread executor),
so the writes of one partition land in the file in the order their offsets were assigned; the owner
thread publishes them in the same order (storage/partition_log.py). `os.write` releases the GIL, so
the owner thread keeps reading, decoding and answering requests while the kernel copies the bytes.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

_writers: dict[Path, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def submit(log_dir: Path, fn: Callable[..., None], *args: object) -> Future:
    """Run `fn(*args)` on `log_dir`'s writer thread, after every write submitted there before."""
    writer = _writers.get(log_dir)
    if writer is None:
        with _lock:
            writer = _writers.get(log_dir)
            if writer is None:
                writer = _writers[log_dir] = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix=f"writer-{log_dir.name}")
    return writer.submit(fn, *args)


def shutdown() -> None:
    """Finish queued writes and stop every writer thread (a later `submit` starts a new one)."""
    with _lock:
        writers = list(_writers.values())
        _writers.clear()
    for writer in writers:
        writer.shutdown(wait=True)
