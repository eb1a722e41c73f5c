"""minikafka: a lightweight Kafka broker in Python speaking the Kafka wire protocol, one node or a KRaft cluster."""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types

__version__ = "0.1.0"


def _defer_package_init(package: str, eager: dict[str, tuple[str, str]] | None = None) -> None:
    """Let `package`'s submodules load without running `package/__init__.py`.

    The package module is registered un-executed (its `__path__` set, so submodule imports work); the
    first access to one of its own top-level names runs the real init in place, so other code in the
    same process is unaffected. `eager` binds names up front, from submodules (name -> (submodule,
    attribute)), so that those accesses need no init at all.
    """
    if package in sys.modules:
        return
    spec = importlib.util.find_spec(package)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)

    class _DeferredInit(types.ModuleType):
        def __getattr__(self, name: str):
            if name.startswith("__") and name not in ("__all__", "__version__"):
                raise AttributeError(name)  # probes of the import machinery and of tools
            self.__class__ = types.ModuleType
            spec.loader.exec_module(self)
            return getattr(self, name)

    module.__class__ = _DeferredInit
    sys.modules[package] = module
    try:
        for name, (submodule, attribute) in (eager or {}).items():
            setattr(module, name, getattr(importlib.import_module(f"{package}.{submodule}"), attribute))
    except (ImportError, AttributeError):  # another layout: run the real init now instead
        del sys.modules[package]


# kafka-python's package init imports the whole client (admin, consumer, producer, network), ~100 ms
# of start-up the broker never uses: `kafka.protocol` / `kafka.errors` load without it.
_defer_package_init("kafka")
# crc32c's init reads its own version from the installed distribution's metadata (importlib.metadata,
# ~20 ms); the broker only needs the C function.
_defer_package_init("crc32c", {"crc32c": ("_crc32c", "crc32c")})
