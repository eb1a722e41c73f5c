"""Producer id allocation that never repeats an id across restarts.

Ids are handed out from blocks; the end of the current block is persisted (fsync + rename) before
any id from it is returned, so after a crash allocation resumes above every id ever handed out.
"""
from __future__ import annotations

import os
from pathlib import Path

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._next = int(path.read_text().strip()) if path.exists() else 0
        self._block_end = self._next

    def _reserve_block(self) -> None:
        end = self._next + BLOCK_SIZE
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(f"{end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._block_end = end

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid
