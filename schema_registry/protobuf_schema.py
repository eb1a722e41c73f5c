"""Protobuf schemas (schemaType PROTOBUF): .proto text (proto2, proto3) or a base64 FileDescriptorProto (what
confluent-kafka's ProtobufSerializer registers), compiled by protoc (grpcio-tools' bundled compiler, run in
process on files written to a temporary directory) into descriptors of the `protobuf` library.

- References: a reference's `name` is the path the schema imports it by (registry.py hands the referenced texts
  over as ReferenceText, which carries it). Well-known imports need no reference, as in Confluent:
  google/protobuf/*.proto (shipped with protoc), google/type/*.proto (googleapis-common-protos) and
  confluent/*.proto (where confluent-kafka is installed).
- Stored text: the .proto text printed from the compiled descriptor (protobuf_printer.py), whichever form came
  in; so the same schema sent as text and as a descriptor is one schema, with one id.
- `formatted(schema, "serialized")`: the base64 FileDescriptorProto, as Confluent answers `?format=serialized`.
- Compatibility: Confluent's Protobuf rules (protobuf_compat.py).
"""
from __future__ import annotations

import ast
import base64
import binascii
import importlib
import importlib.util
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError

from minikafka.schema_registry import errors, protobuf_compat, protobuf_printer

MAIN_NAME = "default"  # the file name of the schema itself, as Confluent names it
# protoc (and the generated module read back) run on the event loop and grow faster than the text (a 1 MB file
# of 20 000 messages took most of a minute): a schema with its references past this many characters is 42201
MAX_SOURCE_CHARS = 128 * 1024
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_HAS_SYNTAX = re.compile(r"(?:\s|//[^\n]*\n|/\*.*?\*/)*(?:syntax|edition)\s*=", re.S)
_IMPORT = re.compile(r'\bimport\s+(?:public\s+|weak\s+)?"([^"]+)"')
_CONFLUENT_MODULES = ("confluent_kafka.schema_registry.confluent.meta_pb2",
                      "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
                      "confluent_kafka.schema_registry.confluent.type.variant_pb2")


@dataclass(frozen=True)
class ProtoSchema:
    """A compiled schema: its file and every file it imports, transitively (dependencies first)."""
    file: descriptor_pb2.FileDescriptorProto
    deps: tuple[descriptor_pb2.FileDescriptorProto, ...] = field(default=())


@dataclass(frozen=True)
class ParsedProtobuf:
    schema: ProtoSchema
    text: str


# ==================================================================== well-known imports

def _protoc_include() -> str:
    import grpc_tools
    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def _known_text(name: str) -> str | None:
    """The text of a well-known import Confluent resolves without a reference (None if not available here)."""
    if name.startswith("google/type/"):
        spec = importlib.util.find_spec("google.type")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            path = Path(folder) / name.removeprefix("google/type/")
            if path.is_file():
                return path.read_text()
        return None
    if name.startswith("confluent/"):
        for module_name in _CONFLUENT_MODULES:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                return None
            if module.DESCRIPTOR.name == name:
                from google.protobuf import descriptor_pool
                proto = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
                return protobuf_printer.to_text(proto, descriptor_pool.Default())
    return None


# ==================================================================== compiling

def _serialized_files(code: bytes) -> bytes:
    """The FileDescriptorProto protoc's Python generator embeds in a module (`AddSerializedFile(b'...')`)."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile" and node.args:
            return ast.literal_eval(node.args[0])
    raise ValueError("protoc's output holds no descriptor")


def _protoc_errors(exc: Any) -> str:
    lines = []
    for e in exc.errors():
        where = e.filename.decode(errors="replace")
        if e.line >= 0:
            where += f":{e.line + 1}:{e.column + 1}"
        lines.append(f"{where}: {e.message.decode(errors='replace')}")
    return "; ".join(lines)


def _compile(main: str, references: dict[str, str]) -> ProtoSchema:
    """protoc on `main` (named MAIN_NAME) beside the referenced files (by their import names) and the
    well-known imports they name; InvalidSchema (42201) with protoc's messages."""
    from grpc_tools import _protoc_compiler

    files = dict(references)
    for source in [main, *references.values()]:
        for name in _IMPORT.findall(source):
            if name not in files and not name.startswith("google/protobuf/"):
                known = _known_text(name)
                if known is not None:
                    files[name] = known
    with tempfile.TemporaryDirectory(prefix="minikafka-proto-") as root:
        for name, text in [*files.items(), (MAIN_NAME, main)]:
            path = Path(root, name).resolve()
            if not path.is_relative_to(Path(root).resolve()) or not name:
                raise errors.invalid_schema(f"{main[:1000]}, details: invalid reference name {name!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            if not _HAS_SYNTAX.match(text):  # proto2, as protoc defaults, without protoc logging that it does
                text = 'syntax = "proto2"; ' + text
            path.write_text(text)
        try:
            with warnings.catch_warnings():  # protoc's warnings (an unused import): not kept, not printed
                warnings.simplefilter("ignore")
                out = _protoc_compiler.get_protos(MAIN_NAME.encode(), [root.encode(), _protoc_include().encode()])
        except _protoc_compiler.ProtocErrors as exc:
            raise errors.invalid_schema(f"{main[:1000]}, details: {_protoc_errors(exc)}") from None
    try:
        protos = [descriptor_pb2.FileDescriptorProto.FromString(_serialized_files(code)) for _, code in out]
    except (ValueError, SyntaxError, DecodeError) as exc:
        raise errors.invalid_schema(f"{main[:1000]}, details: {exc}") from None
    return ProtoSchema(protos[-1], tuple(protos[:-1]))


def _pool(schema: ProtoSchema) -> DescriptorPool:
    """A pool of the schema's files and descriptor.proto (the options' types)."""
    pool = DescriptorPool()
    names = {d.name for d in schema.deps}
    if "google/protobuf/descriptor.proto" not in names:
        pool.AddSerializedFile(descriptor_pb2.DESCRIPTOR.serialized_pb)
    for proto in [*schema.deps, schema.file]:
        pool.Add(proto)
    return pool


def _from_descriptor(text: str, references: dict[str, str]) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto `text` encodes in base64, or None if `text` is not one."""
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return proto if proto.message_type or proto.enum_type or proto.syntax or proto.package else None


def parse(text: str, references: list[str] = (), normalize: bool = False) -> ParsedProtobuf:
    """`references` are the referenced schemas' texts (dependencies first), each with its import name (`.name`).
    InvalidSchema (42201) for anything protoc or the descriptor pool refuses. `normalize` changes nothing: the
    stored text is already printed from the descriptor."""
    refs: dict[str, str] = {}
    for ref in references:
        name = getattr(ref, "name", None)
        if not isinstance(name, str) or not name:
            raise errors.invalid_schema(f"{text[:1000]}, details: a Protobuf reference needs the name it is "
                                        "imported by")
        if name == MAIN_NAME:
            raise errors.invalid_schema(f"{text[:1000]}, details: the reference name {MAIN_NAME!r} is the "
                                        "schema's own")
        refs[name] = str(ref)
    size = len(text) + sum(len(ref) for ref in refs.values())
    if size > MAX_SOURCE_CHARS:
        raise errors.invalid_schema(f"{text[:1000]}, details: a Protobuf schema with its references is limited "
                                    f"to {MAX_SOURCE_CHARS} characters here (this one has {size})")
    source = text
    if _BASE64.fullmatch(text):
        given = _from_descriptor(text, refs)
        if given is None:
            raise errors.invalid_schema(f"{text[:1000]}, details: neither .proto text nor a base64 "
                                        "FileDescriptorProto")
        given.name = MAIN_NAME
        stub = "".join(f'import "{dep}";\n' for dep in given.dependency)
        imports = _compile('syntax = "proto3";\n' + stub, refs)
        try:
            source = protobuf_printer.to_text(given, _pool(ProtoSchema(given, imports.deps)))
        except (TypeError, ValueError, KeyError) as exc:
            raise errors.invalid_schema(f"{text[:1000]}, details: {exc}") from None
    schema = _compile(source, refs)
    try:
        canonical = protobuf_printer.to_text(schema.file, _pool(schema))
    except (TypeError, ValueError, KeyError) as exc:
        raise errors.invalid_schema(f"{text[:1000]}, details: {exc}") from None
    return ParsedProtobuf(schema, canonical)


def formatted(schema: ProtoSchema, fmt: str) -> str | None:
    """The schema in Confluent's output format `fmt` (`serialized`: the base64 FileDescriptorProto); None for
    the stored text (the default, and any format Protobuf does not know, as Confluent answers)."""
    if fmt.lower() == "serialized":
        return base64.b64encode(schema.file.SerializeToString()).decode("ascii")
    return None


def check(level: str, new: ProtoSchema, previous: list[tuple[int, str, ProtoSchema]]) -> list[str]:
    """The incompatibility details of `new` against `previous` (version, text, schema), oldest first, under
    `level`; [] when compatible (Confluent's Protobuf rules, protobuf_compat.py)."""
    return protobuf_compat.check(level, new, previous)
