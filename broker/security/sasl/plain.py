"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: `[authzid] NUL authcid NUL passwd`, checked
against the listener's JAAS users in constant time; the authzid, if given, must equal the username."""
from __future__ import annotations

import hmac
from typing import Mapping


class PlainError(Exception):
    """PLAIN authentication failed; the message is what Kafka sends the client."""


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        tokens = text.split("\x00", 3)
        if len(tokens) != 3:
            raise PlainError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
        authzid, username, password = tokens
        if not username:
            raise PlainError("Authentication failed: username not specified")
        if not password:
            raise PlainError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare even for an unknown user, so that timing does not tell whether the user exists
        ok = hmac.compare_digest(password.encode("utf-8"), (expected or "\x00" + password).encode("utf-8"))
        if expected is None or not ok:
            raise PlainError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise PlainError("Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""
