"""A cluster node's ACLs, SCRAM credentials, dynamic broker configs and group configs follow the
metadata image (Kafka: the StandardAuthorizer, the SCRAM credential cache, DynamicBrokerConfig and the
GroupConfigManager fed by the BrokerMetadataPublisher).

Invariant: after every committed run of metadata records (ClusterRuntime's listeners, in commit
order) the authorizer's ACL set, the credential store, the BROKER config layers ("" and this
node's id) and the GROUP config overrides are exactly the image's; nothing is read from or written to the single-node files, so a
restarted node has what the replayed log says. Work is done only when the image's
`security_version` moved (or on the first call, which marks the ACLs loaded).
"""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from minikafka.broker.security.acl import AclBinding
from minikafka.broker.security.sasl.scram import ScramCredential

if TYPE_CHECKING:
    from minikafka.metadata.image import MetadataImage
    from minikafka.broker.state import BrokerState


def credentials_of(image: "MetadataImage") -> dict[str, dict[str, ScramCredential]]:
    """user -> mechanism -> credential, as the image holds them."""
    b64 = base64.b64decode
    return {user: {mech: ScramCredential(b64(c["salt"]), b64(c["storedKey"]), b64(c["serverKey"]), c["iterations"])
                   for mech, c in by_mech.items()}
            for user, by_mech in image.scram.items()}


class SecuritySync:
    def __init__(self, state: "BrokerState") -> None:
        self.state = state
        self.version = -1

    def __call__(self, image: "MetadataImage", _changed: list, _deleted: list) -> None:
        if image.security_version == self.version:
            return
        self.version = image.security_version
        state = self.state
        if state.authorizer is not None:
            state.authorizer.store.follow(AclBinding(*row) for row in image.acls.values())
        state.scram_credentials.follow(credentials_of(image))
        state.dynamic_config.follow(image.broker_configs.get("", {}),
                                    image.broker_configs.get(str(state.node_id), {}))
        state.group_configs.follow(image.group_configs)
        state.client_metrics_configs.follow(image.client_metrics_configs)
        state.client_quotas.follow(image.client_quotas)
        from minikafka.broker.security.delegation_tokens import TokenInfo  # tokens: their SCRAM logins too
        state.delegation_tokens.follow(TokenInfo.from_record(d) for d in image.delegation_tokens.values())


def attach(state: "BrokerState") -> None:
    """Make `state`'s security stores follow `state.cluster`'s image from now on."""
    assert state.cluster is not None
    state.security_sync = SecuritySync(state)  # type: ignore[attr-defined]
    state.features.follow(lambda: state.cluster.image)  # finalized features: the image's FeatureLevel records
    state.cluster.add_listener(state.security_sync)


def bootstrap_credentials(state: "BrokerState"):
    """The active controller's activation step: the SCRAM credentials formatted into this node's data
    dir (`minikafka storage format --add-scram`, read now, at start-up) go into the metadata log once
    per cluster, with BootstrapDone (Kafka: the bootstrap checkpoint's UserScramCredentialRecords)."""
    from minikafka.broker.security.sasl.credentials import ScramCredentialStore
    b64 = lambda data: base64.b64encode(data).decode("ascii")  # noqa: E731
    creds = ScramCredentialStore(state.config.log_dirs[0]).load().users()
    records = [(user, mech, b64(c.salt), b64(c.stored_key), b64(c.server_key), c.iterations)
               for user, by_mech in sorted(creds.items()) for mech, c in sorted(by_mech.items())]

    def on_activate(controller) -> None:
        if controller.image.features_epoch < 0:  # Kafka's bootstrap FeatureLevelRecords: a new cluster's levels
            controller.set_feature_levels(state.features.file_levels())
        if not controller.image.bootstrapped:
            controller.bootstrap(records)
    return on_activate
