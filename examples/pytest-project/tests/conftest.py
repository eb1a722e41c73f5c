import json
import os

import pytest


@pytest.fixture(autouse=True)
def _report_broker(minikafka):
    """Which broker served this test (minikafka's suite checks xdist's one-broker-per-worker with it)."""
    report = os.environ.get("EXAMPLE_REPORT_DIR")
    if report:
        import minikafka as package
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(os.path.join(report, f"{worker}.jsonl"), "a") as f:
            f.write(json.dumps({"worker": worker, "bootstrap": minikafka.bootstrap_servers,
                                "pid": minikafka.pid, "package": package.__file__}) + "\n")
    yield
