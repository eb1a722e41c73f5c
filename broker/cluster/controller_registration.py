"""A controller's registration with the active controller (KIP-919, Kafka's ControllerRegistrationManager).

Every node whose process.roles holds `controller` (combined nodes and controller-only nodes, voters and a
dynamic quorum's observers alike) sends ControllerRegistration (API 70) over the controller listener once
its image has caught up with the metadata log: a random incarnation id per process, zkMigrationReady
false, its controller listeners' advertised endpoints and the features it supports (what ApiVersions
reports: kraft.version 0-1). The active controller appends a RegisterController record
(metadata/records.py); the registration is in the metadata image (`image.controllers`), so snapshots,
restarts and controller failovers keep it.

As Kafka: one request at a time; an error answer or a lost request is retried after an exponential
backoff; once answered, nothing more is sent while the image holds this incarnation's registration. It is
sent again when the image loses it or shows another incarnation (e.g. truncated away by a new leader), or
when the answer came but the record did not show up in the image within a while.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Iterable

from minikafka.broker.config.features import SUPPORTED

if TYPE_CHECKING:
    from minikafka.broker.cluster.runtime import ClusterRuntime

log = logging.getLogger(__name__)

VERSION = 0
POLL_S = 0.1
BACKOFF_INITIAL_S = 0.1  # Kafka's resend backoff: 100 ms doubling
BACKOFF_MAX_S = 5.0
SHOW_UP_S = 10.0  # an acknowledged registration missing from the image this long afterwards is sent again


def supported_features(kraft_version: int) -> list[tuple[str, int, int]]:
    """(feature, min, max) this controller supports: the ranges ApiVersions reports (a quorum node: kraft.version
    0-1, a static quorum too, since it may be upgraded to kraft.version 1, KAFKA-16538)."""
    out = [(f.name, f.min_version, f.max_version) for f in SUPPORTED.values() if f.name != "kraft.version"]
    out.append(("kraft.version", 0, 1))
    return out


def controller_endpoints(state) -> list[tuple[str, str, int, str]]:
    """(listener, advertised host, port, security protocol) of this node's controller listeners."""
    config = state.config
    advertised = {l.name: l for l in config.advertised_listeners}  # Kafka: the controller listeners as advertised,
    out = []  # else as bound (a controller listener is rarely in advertised.listeners)
    for listener in config.listeners:
        if listener.name in config.controller_listener_names:
            adv = advertised.get(listener.name, listener)
            out.append((listener.name, adv.host, adv.port, config.security_protocols.get(listener.name, "PLAINTEXT")))
    return out


def _range_text(lo: int, hi: int) -> str:
    """Kafka's VersionRange.toString."""
    return str(lo) if lo == hi else f"{lo}+" if hi == 32767 else f"{lo}-{hi}"


def reason_controllers_do_not_support(controllers: dict, own_id: int, voter_ids: Iterable[int], feature: str,
                                      level: int) -> str | None:
    """Kafka's FeatureControlManager.reasonNotSupported, the controllers' part: every registered controller
    but this one (checked before) must support `level` of `feature` (an absent feature: 0-0), and every
    static voter must have registered."""
    found = {own_id}
    for cid in sorted(controllers):
        if cid == own_id:
            continue
        lo, hi = controllers[cid].features.get(feature, (0, 0))
        if not lo <= level <= hi:
            what = f"Controller {cid}"
            return f"{what} does not support this feature." if hi == 0 else \
                f"{what} only supports versions {_range_text(lo, hi)}"
        found.add(cid)
    for vid in voter_ids:
        if vid not in found:
            return f"controller {vid} has not registered, and may not support this feature"
    return None


class ControllerRegistrationManager:
    def __init__(self, runtime: "ClusterRuntime") -> None:
        self.runtime = runtime
        self.incarnation_id = uuid.uuid4()
        self.successful_rpcs = 0
        self.failed_rpcs = 0

    def registered_in_log(self) -> bool:
        reg = self.runtime.image.controllers.get(self.runtime.node_id)
        return reg is not None and reg.incarnation_id == str(self.incarnation_id)

    async def _caught_up(self) -> None:
        """Kafka's controller starts registering once it has caught up with the metadata log."""
        node = self.runtime.driver.node
        while node.high_watermark <= 0 or self.runtime.image.offset < node.high_watermark - 1 \
                or self.runtime.state.cluster_id is None:
            await asyncio.sleep(POLL_S / 2)

    def _request(self):
        from minikafka.broker.cluster.runtime import SECURITY_PROTOCOL_IDS
        from minikafka.protocol.messages import ControllerRegistrationRequest as R
        features = supported_features(self.runtime.driver.node.kraft_version)
        return R(controller_id=self.runtime.node_id, incarnation_id=self.incarnation_id, zk_migration_ready=False,
                 listeners=[R.Listener(name=n, host=h, port=p, security_protocol=SECURITY_PROTOCOL_IDS.get(sp, 0))
                            for n, h, p, sp in controller_endpoints(self.runtime.state)],
                 features=[R.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                           for n, lo, hi in features])

    async def run(self) -> None:
        from minikafka.broker.cluster.runtime import ControllerUnavailableError
        from minikafka.protocol.messages import ControllerRegistrationResponse
        await self._caught_up()
        acknowledged_at: float | None = None
        while True:
            if self.registered_in_log():
                acknowledged_at = None
                await asyncio.sleep(POLL_S)
                continue
            if acknowledged_at is not None and time.monotonic() - acknowledged_at < SHOW_UP_S:
                await asyncio.sleep(POLL_S)  # answered: the record is on its way to this node's image
                continue
            try:
                resp = await self.runtime.controller_request(self._request(), VERSION, ControllerRegistrationResponse,
                                                             channel="registration")
                code = resp.error_code
            except ControllerUnavailableError:
                code = -1
            if code == 0:
                self.successful_rpcs += 1
                self.failed_rpcs = 0
                acknowledged_at = time.monotonic()
                log.info("cluster: the active controller acknowledged controller %d's registration (incarnation %s)",
                         self.runtime.node_id, self.incarnation_id)
                continue
            delay = min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** min(self.failed_rpcs, 10))
            self.failed_rpcs += 1
            log.info("cluster: controller registration refused with error %d; retrying in %.1f s", code, delay)
            await asyncio.sleep(delay)
