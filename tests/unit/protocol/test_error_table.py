"""One table of Kafka error codes (protocol/errors.py, from kafka-python's `kafka.errors`): it names every code
as Kafka does, and no other module declares a code as a number of its own."""
from __future__ import annotations

import ast
import tomllib

import kafka.errors as ke

from minikafka.protocol import errors
from tests.conftest import ROOT

# Kafka 4.x's Errors enum names that kafka-python spells differently (the table carries both)
KAFKA_NAMES = {"UNKNOWN_SERVER_ERROR": -1, "NONE": 0, "NOT_LEADER_OR_FOLLOWER": 6, "MESSAGE_TOO_LARGE": 10,
               "INVALID_TOPIC_EXCEPTION": 17, "INVALID_REPLICA_ASSIGNMENT": 39}
ERROR_WORDS = ("_DENIED", "_ERROR", "_FAILED", "_CODE")


def table() -> dict[str, int]:
    return {n: getattr(errors, n) for n in dir(errors) if n.isupper()}


def test_the_table_is_kafka_pythons_with_kafkas_names():
    t = table()
    for name in dir(ke):
        cls = getattr(ke, name)
        if isinstance(cls, type) and issubclass(cls, ke.BrokerResponseError) and isinstance(getattr(cls, "errno", None), int):
            assert t[cls.message] == cls.errno, cls
    for name, code in KAFKA_NAMES.items():
        assert t[name] == code


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return None if inner is None else -inner
    return None


def test_no_module_declares_an_error_code_of_its_own():
    t = table()
    codes = set(t.values())
    forbidden = set(t) - {"UNKNOWN", "NO_ERROR"}  # kafka-python's spellings of -1 / 0 mean nothing in Kafka
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found = []
    for folder in mapping.values():
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "protocol" / "errors.py" or "__pycache__" in path.parts:
                continue
            for node in ast.parse(path.read_text()).body:
                if not isinstance(node, ast.Assign):
                    continue
                pairs: list[tuple[ast.AST, ast.AST]] = []
                for target in node.targets:
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs += list(zip(target.elts, node.value.elts))
                    else:
                        pairs.append((target, node.value))
                for target, value in pairs:
                    code = _int(value)
                    if not isinstance(target, ast.Name) or code is None:
                        continue
                    name = target.id
                    if name in forbidden or (code in codes and code != 0 and name.endswith(ERROR_WORDS)):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name} = {code}")
    assert found == [], "declare error codes in protocol/errors.py only:\n" + "\n".join(found)
