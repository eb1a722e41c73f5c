"""docs/security.md's runnable OAUTHBEARER example (examples/oauthbearer_jwks.py): it starts its own broker
(minikafka.testing.MiniKafka) with a JWKS-validating listener, produces and consumes with signed tokens
through confluent-kafka's oauth_cb, and sees a token of another key refused."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.minikafka_only  # the example starts minikafka itself


def test_the_documented_oauthbearer_example_runs():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "oauthbearer_jwks.py")], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "alice produced and consumed: ['signed hello 0', 'signed hello 1', 'signed hello 2']" in proc.stdout
    assert 'refused=True' in proc.stdout and '{"status":"invalid_token"}' in proc.stdout, proc.stdout
    assert "sasl.oauthbearer.jwks.endpoint.url=file://" in proc.stdout
