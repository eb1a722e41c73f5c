"""broker/warmup.py imports modules in a worker thread while the event loop may import others. That is
safe only if minikafka's modules import each other without cycles (two threads importing the two ends
of a cycle would get a partially initialized module); this test keeps it so."""
from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

from minikafka.broker import installation

ROOT = Path(__file__).resolve().parents[3]
# every package of the wheel: pyproject.toml's mapped folders and every sub-package below them
PACKAGES = {package: folder for package, folder in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
    "setuptools"]["package-dir"].items()}


def _modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = [*package.split("."), *path.relative_to(ROOT / folder).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _module_level_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """minikafka modules `name` imports when it is executed (not inside functions or `if` blocks such as
    TYPE_CHECKING), with the packages a submodule import executes first."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            parts = target.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in found if m in known and m != name}


def test_minikafka_modules_import_each_other_without_cycles():
    modules = _modules()
    graph = {name: _module_level_imports(name, path, modules) for name, path in modules.items()}
    state: dict[str, int] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep):] + [name, dep]))
            if dep not in state:
                visit(dep, stack + [name])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_warm_up_lists_only_existing_modules():
    for name in installation.required_modules(quorum=True):
        importlib.import_module(name)
