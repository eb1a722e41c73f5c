"""What a SASL exchange raises to the connection; importable without the mechanisms (start-up cost)."""
from __future__ import annotations

from typing import Any


class SaslFailure(Exception):
    """Authentication failed: answer `response` (None: no answer) after the failure delay, then close."""

    def __init__(self, reason: str, response: Any = None, delayed: bool = True) -> None:
        super().__init__(reason)
        self.response = response
        self.delayed = delayed


class SessionExpired(Exception):
    """A request arrived after the SASL session expired (KIP-368): close without processing it."""


CREDENTIALS_FILE = "scram-credentials.json"  # in the first log dir (broker/security/sasl/credentials.py)


class CredentialStoreError(Exception):
    """The credentials file is unreadable or malformed."""
