"""The registry's counters, plain ints bumped by the REST layer (rest.py) once per request, read by the
broker's /metrics collector (broker/ops/metrics_collector.py) at scrape time as the
minikafka_schema_registry_* series. Labels come from fixed sets (route families, status classes), never
from a request's text, so no client can grow them.
"""
from __future__ import annotations

from typing import Any

FAMILIES = ("root", "subjects", "schemas", "compatibility", "config", "mode")
OTHER = "other"


def family(path: str) -> str:
    """The endpoint family of a request path: its first segment if known, else `other`."""
    first = path.lstrip("/").partition("/")[0]
    if not first:
        return "root"
    return first if first in FAMILIES else OTHER


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status < 600 else "5xx"


class RegistryMetrics:
    """Counters of one registry listener; gauges are read from the registry's state when scraped."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry  # registry.SchemaRegistry: `.state` is read at scrape time
        self.requests: dict[tuple[str, str], int] = {}  # (family, status class) -> answers
        self.schemas_registered = 0  # registrations that created a version
        self.compatibility_rejections: dict[str, int] = {"register": 0, "check": 0}  # 409s, is_compatible=false
        self.authentication_failures = 0  # 401s
        self.authorization_denials = 0  # 403s

    def request(self, path: str, status: int) -> None:
        key = (family(path), status_class(status))
        self.requests[key] = self.requests.get(key, 0) + 1

    def gauges(self) -> dict[str, int]:
        """subjects (with a live version), schema ids, live versions: a pass over the subjects."""
        state = self.registry.state
        subjects = versions = 0
        for by_version in state.subjects.values():
            live = sum(1 for v in by_version.values() if not v.deleted)
            versions += live
            subjects += live > 0
        return {"subjects": subjects, "schema_ids": len(state.ids), "versions": versions}
