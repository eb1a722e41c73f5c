"""The first SCRAM users, before the broker starts: `minikafka storage format --add-scram ...`, as
Kafka's `kafka-storage format --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'`.

Spec syntax (Kafka's ScramParser): `<MECHANISM>=[name=<user>,password=<password>(,iterations=<n>)]`;
values may be double-quoted (then they may contain ',' and ']'). Iterations default to 4096 and must
lie in [4096, 16384]. PBKDF2 runs here, in the CLI process, never in the broker.
"""
from __future__ import annotations

from pathlib import Path

from minikafka.broker.security.sasl.credentials import ScramCredentialStore
from minikafka.broker.security.sasl.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential


class ScramSpecError(ValueError):
    """An --add-scram argument cannot be used."""


def _split_fields(body: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    i, n = 0, len(body)
    while i < n:
        eq = body.find("=", i)
        if eq < 0:
            raise ScramSpecError(f"expected key=value in [{body}]")
        key = body[i:eq].strip().lower()
        j = eq + 1
        if j < n and body[j] == '"':
            end = body.find('"', j + 1)
            if end < 0:
                raise ScramSpecError(f"unterminated quote in [{body}]")
            value, j = body[j + 1:end], end + 1
        else:
            end = body.find(",", j)
            end = n if end < 0 else end
            value, j = body[j:end], end
        fields[key] = value
        if j < n and body[j] != ",":
            raise ScramSpecError(f"expected ',' after {key} in [{body}]")
        i = j + 1
    return fields


def parse_scram_spec(spec: str) -> tuple[str, str, str, int]:
    """(mechanism, user, password, iterations) of one --add-scram argument."""
    mechanism, sep, rest = spec.partition("=")
    mechanism = mechanism.strip().upper()
    rest = rest.strip()
    if not sep or not rest.startswith("[") or not rest.endswith("]"):
        raise ScramSpecError(f"--add-scram expects MECHANISM=[name=...,password=...], got {spec!r}")
    if mechanism not in MECHANISMS:
        raise ScramSpecError(f"unknown SCRAM mechanism {mechanism!r} (one of {', '.join(MECHANISMS)})")
    fields = _split_fields(rest[1:-1])
    unknown = set(fields) - {"name", "password", "iterations"}
    if unknown:
        raise ScramSpecError(f"unsupported field(s) {', '.join(sorted(unknown))} in {spec!r}")
    if not fields.get("name"):
        raise ScramSpecError(f"you must supply 'name' to add-scram: {spec!r}")
    if not fields.get("password"):
        raise ScramSpecError(f"you must supply 'password' to add-scram: {spec!r}")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ScramSpecError(f"iterations must be an integer in {spec!r}") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramSpecError(f"iterations {iterations} outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    return mechanism, fields["name"], fields["password"], iterations


def add_scram_credentials(data_dir: str | Path, specs: list[str]) -> list[tuple[str, str]]:
    """Upsert the credentials of `specs` into `data_dir`'s credential file (durably); returns
    (user, mechanism) for each. All specs are checked before anything is written."""
    parsed = [parse_scram_spec(s) for s in specs]
    store = ScramCredentialStore(Path(data_dir)).load()
    upserts = [(user, mech, ScramCredential.from_password(mech, password, iterations))
               for mech, user, password, iterations in parsed]
    store.apply(upserts, [])
    return [(user, mech) for user, mech, _ in upserts]
