"""One module per API family; each registers its APIs with `@handles` (broker/network/registry.py) when it is
imported. The package imports none of them: the broker imports a handler module when its API is
first requested (`registry.spec_for`) or during the warm-up after start (broker/warmup.py);
`load_all()` imports every one (tests, tools)."""
from __future__ import annotations

import importlib


def load_all() -> None:
    """Import every handler module of the static tables (fills `registry.HANDLERS` and
    `registry.CONTROLLER_HANDLERS`)."""
    from minikafka.broker.network.registry import API_TABLE, CONTROLLER_API_TABLE, module_name
    for entry in [*API_TABLE.values(), *CONTROLLER_API_TABLE.values()]:
        importlib.import_module(module_name(entry))
