"""Client of a broker's fault injection (`/faults` on its admin HTTP listener; broker/ops/faults.py).

    faults = FaultsClient("http://127.0.0.1:9644")      # or MiniKafka(faults=True).faults
    rule_id = faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic="orders", times=3)
    faults.injected()   # {"rules": [...], "fired": [...]}
    faults.clear()

Blocking (urllib, standard library only). A refusal (faults disabled: 403; a bad rule: 400) raises
`FaultsError` carrying the broker's message.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

__all__ = ["FaultsClient", "FaultsError"]


class FaultsError(RuntimeError):
    """The broker refused a fault request (status and message), or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class FaultsClient:
    """`/faults` of the admin listener at `admin_url` (http://HOST:PORT)."""

    def __init__(self, admin_url: str, timeout: float = 10.0) -> None:
        self.url = admin_url.rstrip("/") + "/faults"
        self.timeout = timeout

    def _call(self, method: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace").strip()
            try:
                text = json.loads(text).get("error", text)
            except (ValueError, AttributeError):
                pass
            raise FaultsError(f"{method} {self.url}: HTTP {exc.code}: {text}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise FaultsError(f"{method} {self.url}: {exc}") from None

    def inject(self, api: str, error: str | None = None, disconnect: str | None = None, delay_ms: int | None = None,
               times: int = 1, topic: str | None = None, partition: int | None = None,
               transactional_id: str | None = None, group_id: str | None = None) -> int:
        """Add a rule (see broker/ops/faults.py); returns its id."""
        rule = {"api": api, "error": error, "disconnect": disconnect, "delay_ms": delay_ms, "times": times,
                "topic": topic, "partition": partition, "transactional_id": transactional_id, "group_id": group_id}
        return self._call("POST", {k: v for k, v in rule.items() if v is not None})["id"]

    def injected(self) -> dict[str, Any]:
        """{"rules": [rule with fired/remaining, ...], "fired": [{"rule", "api", "action", ...}, ...]}."""
        return self._call("GET")

    def fired(self) -> list[dict[str, Any]]:
        return self.injected()["fired"]

    def clear(self) -> None:
        """Remove every rule and the fired log."""
        self._call("DELETE")
