"""The SCRAM credential file (broker/security/sasl/credentials.py): durable upserts and deletions, nothing
secret on disk, corrupt files refuse to load; the --add-scram spec parser (broker/security/sasl/bootstrap.py)."""
from __future__ import annotations

import json

import pytest

from minikafka.broker.security.sasl.bootstrap import ScramSpecError, add_scram_credentials, parse_scram_spec
from minikafka.broker.security.sasl.credentials import CREDENTIALS_FILE, CredentialStoreError, ScramCredentialStore
from minikafka.broker.security.sasl.scram import ScramCredential


def test_apply_persists_and_reloads(tmp_path):
    store = ScramCredentialStore(tmp_path).load()
    a = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    b = ScramCredential.from_password("SCRAM-SHA-512", "pw", 8192)
    store.apply([("alice", "SCRAM-SHA-256", a), ("alice", "SCRAM-SHA-512", b)], [])
    again = ScramCredentialStore(tmp_path).load()
    assert again.get("alice", "SCRAM-SHA-256") == a and again.get("alice", "SCRAM-SHA-512") == b
    again.apply([], [("alice", "SCRAM-SHA-256")])
    assert ScramCredentialStore(tmp_path).load().users() == {"alice": {"SCRAM-SHA-512": b}}
    again.apply([], [("alice", "SCRAM-SHA-512")])
    assert ScramCredentialStore(tmp_path).load().users() == {}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 2, "users": {}}',
                                  '{"version": 1, "users": {"a": {"SCRAM-SHA-1": {}}}}',
                                  '{"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "!"}}}}'])
def test_corrupt_file_refuses_to_load(tmp_path, text):
    (tmp_path / CREDENTIALS_FILE).write_text(text)
    with pytest.raises(CredentialStoreError):
        ScramCredentialStore(tmp_path).load()


def test_bootstrap_writes_no_password(tmp_path):
    added = add_scram_credentials(tmp_path, ["SCRAM-SHA-256=[name=admin,password=admin-secret]",
                                             'SCRAM-SHA-512=[name=admin,password="a,b]c",iterations=8192]'])
    assert added == [("admin", "SCRAM-SHA-256"), ("admin", "SCRAM-SHA-512")]
    text = (tmp_path / CREDENTIALS_FILE).read_text()
    assert "admin-secret" not in text and "a,b]c" not in text
    doc = json.loads(text)
    assert doc["users"]["admin"]["SCRAM-SHA-512"]["iterations"] == 8192
    store = ScramCredentialStore(tmp_path).load()
    cred = store.get("admin", "SCRAM-SHA-512")
    assert cred == ScramCredential.from_password("SCRAM-SHA-512", "a,b]c", 8192, cred.salt)


@pytest.mark.parametrize("spec", ["SCRAM-SHA-256", "SCRAM-SHA-256=name=a,password=b", "PLAIN=[name=a,password=b]",
                                  "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[password=b]",
                                  "SCRAM-SHA-256=[name=a,password=b,iterations=99999]",
                                  "SCRAM-SHA-256=[name=a,password=b,salt=x]", 'SCRAM-SHA-256=[name="a,password=b]'])
def test_bad_specs(spec):
    with pytest.raises(ScramSpecError):
        parse_scram_spec(spec)
