"""broker/ops/log_format.py: one JSON object per line, with `extra=` fields; text stays the default."""
from __future__ import annotations

import json
import logging

from minikafka.broker.ops.log_format import JsonFormatter, TEXT_FORMAT


def record(msg: str, *args, extra: dict | None = None, exc_info=None) -> logging.LogRecord:
    r = logging.LogRecord("minikafka.broker.network.connection", logging.WARNING, __file__, 1, msg, args, exc_info)
    for k, v in (extra or {}).items():
        setattr(r, k, v)
    return r


def test_json_line_has_the_fields_and_extras():
    line = JsonFormatter().format(record("closing %s\nnext", "peer", extra={"client_id": "c1", "api_key": 0,
                                                                              "topic": "t", "partition": 3}))
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["level"] == "WARNING" and obj["logger"] == "minikafka.broker.network.connection"
    assert obj["message"] == "closing peer\nnext"
    assert obj["time"].endswith("Z") and "T" in obj["time"]
    assert (obj["client_id"], obj["api_key"], obj["topic"], obj["partition"]) == ("c1", 0, "t", 3)


def test_json_exception_is_one_field():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        obj = json.loads(JsonFormatter().format(record("failed", exc_info=sys.exc_info())))
    assert "ValueError: boom" in obj["exception"]


def test_text_format_is_unchanged():
    assert TEXT_FORMAT == "%(asctime)s %(levelname)s %(name)s: %(message)s"
