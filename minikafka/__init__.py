"""minikafka: a lightweight single-node broker speaking the Kafka wire protocol."""
from __future__ import annotations

import importlib.util
import sys
import types

__version__ = "0.1.0"


def _defer_kafka_package_init() -> None:
    """Let `kafka.protocol` / `kafka.errors` load without running `kafka/__init__.py`.

    kafka-python's package init imports the whole client (admin, consumer, producer, network),
    ~100 ms of start-up the broker never uses. The package module is registered un-executed; the
    first access to one of its own top-level names (e.g. `from kafka import KafkaProducer`) runs
    the real init in place, so client code in the same process is unaffected.
    """
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)

    class _DeferredInit(types.ModuleType):
        def __getattr__(self, name: str):
            if name.startswith("__"):
                raise AttributeError(name)
            self.__class__ = types.ModuleType
            spec.loader.exec_module(self)
            return getattr(self, name)

    module.__class__ = _DeferredInit
    sys.modules["kafka"] = module


_defer_kafka_package_init()
