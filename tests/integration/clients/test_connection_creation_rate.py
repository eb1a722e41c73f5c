"""KIP-612's `max.connection.creation.rate` (broker-wide) and `listener.name.<l>.max.connection.creation.rate`:
as Kafka's ConnectionQuotas, a connection past the rate is not refused but accepted late (its first request
is answered only after the throttle time, bounded by one quota window); the rate is changed and removed as
a dynamic broker config; a bad value is refused at start and as a dynamic change.

The broker runs with quota.window.num=2 x 1 s windows so that the burst Kafka's sampled rate allows (the
window counts as at least num-1 windows) is small: at 2/s the first two connections pass at once."""
from __future__ import annotations

import subprocess
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.integration.admin.test_broker_configs import BROKER_RES, raw_incremental
from tests.support.helpers import RawClient

pytestmark = pytest.mark.minikafka_only

WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
SET, DELETE = 0, 1


def _served_after(bootstrap: str) -> float:
    """Seconds from connecting to the answer of the connection's first request."""
    started = time.monotonic()
    with RawClient(bootstrap) as c:
        resp = c.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
        assert resp.error_code == 0
    return time.monotonic() - started


def _burst(bootstrap: str, n: int = 6) -> list[float]:
    return [_served_after(bootstrap) for _ in range(n)]


def _alter(bootstrap: str, op: int, name: str, value: str | None = None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of the cluster-wide broker default (op 0 SET, 1 DELETE)."""
    return raw_incremental(bootstrap, BROKER_RES, "", [(name, op, value)])


def _throttled(times: list[float]) -> None:
    assert min(times) < 0.3, times  # within the rate (a burst of about num-1 windows' worth): at once
    assert sum(t >= 0.2 for t in times) >= 3, times  # past it: served, but late (never refused)
    assert max(times) <= 1.5, times  # the wait is bounded by one window (quota.window.size.seconds)


def test_connections_past_the_broker_wide_rate_are_accepted_late(broker_factory):
    b = broker_factory({**WINDOWS, "max.connection.creation.rate": "2"})
    _throttled(_burst(b.bootstrap))
    # a dynamic cluster-wide default overrides the static value: served at once
    assert _alter(b.bootstrap, SET, "max.connection.creation.rate", "1000") == (0, None)
    time.sleep(2.1)  # the windows the burst filled have passed
    assert max(_burst(b.bootstrap)) < 0.3
    # deleted: the static value holds again
    assert _alter(b.bootstrap, DELETE, "max.connection.creation.rate") == (0, None)
    time.sleep(2.1)
    _throttled(_burst(b.bootstrap))


def test_a_dynamic_rate_applies_and_goes(broker_factory):
    b = broker_factory(WINDOWS)
    assert max(_burst(b.bootstrap)) < 0.3
    assert _alter(b.bootstrap, SET, "max.connection.creation.rate", "2") == (0, None)
    time.sleep(2.1)
    _throttled(_burst(b.bootstrap))
    assert _alter(b.bootstrap, DELETE, "max.connection.creation.rate") == (0, None)
    time.sleep(2.1)
    assert max(_burst(b.bootstrap)) < 0.3


def test_a_listener_rate_applies_to_its_listener(broker_factory):
    b = broker_factory({**WINDOWS, "listener.name.plaintext.max.connection.creation.rate": "2"})
    _throttled(_burst(b.bootstrap))


def test_a_bad_rate_is_refused(broker_factory, tmp_path):
    b = broker_factory(WINDOWS)
    code, message = _alter(b.bootstrap, SET, "max.connection.creation.rate", "-1")
    assert code != 0 and "max.connection.creation.rate" in (message or ""), (code, message)
    assert max(_burst(b.bootstrap, 3)) < 0.3  # nothing applied
    from minikafka.testing import minikafka_command
    res = subprocess.run([*minikafka_command(), "serve", "--override", f"log.dirs={tmp_path / 'bad'}",
                          "--override", "max.connection.creation.rate=abc"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "max.connection.creation.rate" in res.stderr, res.stderr[-2000:]
