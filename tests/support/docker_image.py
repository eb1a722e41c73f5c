"""What docker/Dockerfile sets for the container, for the tests that run the image's steps without a Docker
engine (tests/integration/install/test_docker_steps.py, tests/integration/cluster/test_cluster_compose.py)."""
from __future__ import annotations

import re

from tests.conftest import ROOT


def image_env() -> dict[str, str]:
    """The MINIKAFKA_* variables of the Dockerfile's ENV instructions (a container starts with them; compose's
    `environment` and `docker run -e` override them)."""
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in dockerfile.splitlines():
        if line.startswith("ENV "):
            env.update(m.groups() for m in re.finditer(r"(MINIKAFKA_\w+)=(\S*)", line))
    return env
