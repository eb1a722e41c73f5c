"""The layering contracts of pyproject.toml ([tool.importlinter]) hold for the package as installed: import-linter
reads the wheel's files (the source folders are only assembled into `minikafka` by the install), with every
import counted, those inside functions and under TYPE_CHECKING included."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.conftest import ROOT


def test_the_import_contracts_are_kept(built_wheel: Path, tmp_path: Path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(built_wheel)],
                   check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    lint = Path(sysconfig.get_paths()["scripts"]) / "lint-imports"
    # run outside the checkout: import-linter puts its working directory first on sys.path, where the source
    # folder `minikafka/` (without the mapped sub-packages) would shadow the installed package
    proc = subprocess.run([str(lint), str(ROOT / "pyproject.toml")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


MAX_MODULE_LINES = 800


def test_every_module_stays_small():
    """A module past ~800 lines is doing several jobs: split it by job (as storage/partition_log.py was into
    log_loader, append_preparation, pending_writes, log_reads and retention) rather than raise this."""
    import tomllib
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    big = {str(path.relative_to(ROOT)): n for folder in folders for path in (ROOT / folder).rglob("*.py")
           if "__pycache__" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


def _module_files() -> dict[str, Path]:
    """Every module of the installed package, by dotted name, from the package-dir mapping."""
    import tomllib
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    modules: dict[str, Path] = {}
    for package, folder in mapping.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules.setdefault(".".join([package, *parts]), path)
    return modules


def _import_time_imports(tree: "ast.Module") -> list[str]:
    """The absolute imports a module runs when it is imported: not those in functions or under TYPE_CHECKING."""
    import ast
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.append(node.module)
                found.extend(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
    visit(tree.body)
    return found


def test_no_module_level_import_cycles():
    """No two of our modules need each other at import time (an import inside a function or for type hints
    only may close a loop; one at module level makes start-up order matter). A package's __init__ counts as
    imported with any of its modules."""
    import ast
    modules = _module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for imported in _import_time_imports(ast.parse(path.read_text())):
            parts = imported.split(".")
            for i in range(2, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in modules and target != name and not name.startswith(target + "."):
                    deps.add(target)
        graph[name] = deps
    cycles = _strongly_connected(graph)
    assert cycles == [], f"module-level import cycles: {cycles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []
