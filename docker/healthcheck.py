"""Container HEALTHCHECK: exit 0 when the broker's /health/ready answers 200, else 1.

The URL is the metrics listener's (MINIKAFKA_MINIKAFKA_METRICS_LISTENER, i.e. minikafka.metrics.listener),
with a wildcard host replaced by loopback. Standard library only: the slim image has no curl."""
import os
import sys
import urllib.error
import urllib.request
from urllib.parse import urlsplit

url = os.environ.get("MINIKAFKA_MINIKAFKA_METRICS_LISTENER", "http://127.0.0.1:9644")
parts = urlsplit(url)
host = "127.0.0.1" if parts.hostname in (None, "0.0.0.0", "::") else parts.hostname
try:
    with urllib.request.urlopen(f"http://{host}:{parts.port or 9644}/health/ready", timeout=3) as resp:
        sys.exit(0 if resp.status == 200 else 1)
except (urllib.error.URLError, OSError, ValueError) as exc:
    print(f"not ready: {exc}", file=sys.stderr)
    sys.exit(1)
