"""SASL/OAUTHBEARER with signed tokens (KIP-768), end to end on one machine: this script plays the identity
provider (an RSA key, its public JWKS in a file), starts a minikafka broker whose OAUTH listener validates
tokens against that JWKS (Kafka's OAuthBearerValidatorCallbackHandler keys), then produces and consumes as
the principal in the token's `sub`, with confluent-kafka's `oauth_cb` handing librdkafka the signed JWTs.
A token signed by another key is refused (SASL_AUTHENTICATION_FAILED, `{"status":"invalid_token"}`).

    python examples/oauthbearer_jwks.py

Your own broker: put the printed `server.properties` lines in its config and point
`sasl.oauthbearer.jwks.endpoint.url` at your provider's JWKS URL; clients fetch tokens from the provider.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from minikafka.testing import MiniKafka, free_port

AUDIENCE, ISSUER = "kafka", "https://idp.example"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def broker_config(jwks: Path, plain: int, oauth: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},OAUTH://127.0.0.1:{oauth}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT",
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config": LOGIN,
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    }


def token_for(key: RSAKey, sub: str, lifetime_s: int = 300) -> tuple[str, float]:
    """What an identity provider hands out: a signed JWT and its expiry (epoch seconds)."""
    now = int(time.time())
    claims = {"sub": sub, "iat": now, "exp": now + lifetime_s, "aud": AUDIENCE, "iss": ISSUER}
    return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key), float(now + lifetime_s)


def client(bootstrap: str, key: RSAKey, sub: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: token_for(key, sub), **extra}


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="oauth-example-"))
    key = RSAKey.generate_key(2048, parameters={"kid": "example-key", "use": "sig", "alg": "RS256"})
    jwks = work / "jwks.json"
    jwks.write_text(json.dumps(KeySet([key]).as_dict(private=False)))  # public keys only
    plain, oauth = free_port(), free_port()
    config = broker_config(jwks, plain, oauth)
    print("server.properties:\n" + "\n".join(f"  {k}={v}" for k, v in config.items()))
    with MiniKafka(config=config, data_dir=work / "data", port=plain):
        bootstrap = f"127.0.0.1:{oauth}"
        topic = f"oauth-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})  # the unauthenticated admin listener
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer(client(bootstrap, key, "alice"))
        for i in range(3):
            producer.produce(topic, f"signed hello {i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer(client(bootstrap, key, "alice", **{"group.id": "oauth-example",
                                                                "auto.offset.reset": "earliest"}))
        consumer.subscribe([topic])
        got: list[str] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        consumer.close()
        print(f"alice produced and consumed: {got}")

        other = RSAKey.generate_key(2048, parameters={"kid": "example-key", "use": "sig", "alg": "RS256"})
        errors: list[str] = []
        forged = AdminClient(client(bootstrap, other, "mallory", error_cb=lambda e: errors.append(e.str()),
                                    log_level=0))
        try:
            forged.list_topics(timeout=5)
            refused = False
        except KafkaException:
            refused = True
        forged.poll(1.0)  # serves error_cb
        reason = next((e for e in errors if "invalid_token" in e), errors[0] if errors else "")
        print(f"a token signed by another key: refused={refused}: {reason}")
        return 0 if got == [f"signed hello {i}" for i in range(3)] and refused else 1


if __name__ == "__main__":
    sys.exit(main())
