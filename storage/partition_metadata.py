"""A partition directory's name and files: `<topic>-<partition>`, and `partition.metadata` (Kafka's
PartitionMetadataFile): "version: 0\\ntopic_id: <base64url uuid>\\n"."""
from __future__ import annotations

import base64
import os
from pathlib import Path

PARTITION_METADATA_FILE = "partition.metadata"


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); ValueError if the name does not fit."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(part)


def topic_id_to_str(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    if len(topic_id) != 16:
        raise ValueError("topic id must be 16 bytes")
    return base64.urlsafe_b64encode(topic_id).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"bad topic id {text!r}")
    return raw


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temp file + fsync + rename + directory fsync."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_partition_metadata(directory: Path, topic_id: bytes) -> None:
    text = f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n"
    atomic_write(Path(directory) / PARTITION_METADATA_FILE, text.encode("ascii"))


def read_partition_metadata(directory: Path) -> bytes | None:
    """The topic id stored in the directory, or None if there is no (readable) file."""
    try:
        text = (Path(directory) / PARTITION_METADATA_FILE).read_text("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        if fields.get("version", "").strip() != "0":
            return None
        return topic_id_from_str(fields["topic_id"].strip())
    except (KeyError, ValueError):
        return None
