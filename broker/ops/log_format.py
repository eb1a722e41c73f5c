"""Log line formats of `minikafka serve`: `text` (the default, as before) or `json`.

JSON: one object per line with `time` (ISO 8601, UTC, ms), `level`, `logger`, `message`, plus every
field a caller passed with `extra=` (client_id, api, topic, partition, partitions_done, bytes, ...),
and `exception` when there is a traceback. Fields come from the record, never from parsing messages.
"""
from __future__ import annotations

import json
import logging
import time

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# attributes every LogRecord has; anything else on a record came from `extra=`
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure(level: str, fmt: str) -> None:
    """Root logging for the broker process: stderr, `fmt` text | json. As logging.basicConfig, it
    leaves a root logger alone that someone else configured (an embedding program, pytest's caplog);
    called again, it replaces its own handler (the config file may change the format)."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, "_minikafka", False)]
    if len(ours) != len(root.handlers):
        return
    handler = logging.StreamHandler()
    handler._minikafka = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper()))
