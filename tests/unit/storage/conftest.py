"""Fixtures for storage tests (helpers live in storage_helpers.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from minikafka.storage import LogConfig, PartitionLog
from tests.support.storage_helpers import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: FakeClock) -> Callable[..., PartitionLog]:
    """open_log(name="t-0", clean=False, **config_fields) -> PartitionLog under tmp_path; closed at teardown."""
    opened: list[PartitionLog] = []

    def factory(name: str = "t-0", *, clean: bool = False, **fields) -> PartitionLog:
        plog = PartitionLog(tmp_path / name, LogConfig(**fields), clock=clock, clean_shutdown=clean)
        opened.append(plog)
        return plog

    yield factory
    for plog in opened:
        plog.close()
