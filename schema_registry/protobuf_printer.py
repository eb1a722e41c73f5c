"""A FileDescriptorProto printed as .proto text: the canonical text the registry stores for a Protobuf schema.

Invariant: compiling the printed text yields the same FileDescriptorProto (source info aside). Type names are
printed as the descriptor holds them: fully qualified with a leading dot (as Confluent prints a schema it was
given as a descriptor), so no name can resolve differently. Options, standard and custom, are printed from the
options messages re-read through a pool of the file and its imports (`pool`), which knows the custom options'
extensions; an option that cannot be read back (an extension no import defines) is an error, never dropped.
"""
from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, text_encoding, text_format
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.unknown_fields import UnknownFieldSet

F = descriptor_pb2.FieldDescriptorProto

_SCALARS = {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
            F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64", F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool",
            F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
            F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64"}
_MESSAGE_MAX = 536870911  # `max` in a message's reserved or extension range
_ENUM_MAX = 2147483647  # `max` in an enum's reserved range
_INDENT = "  "


class PrintError(ValueError):
    """The descriptor holds something the printer cannot write back as .proto text."""


def scalar_name(field: Any) -> str | None:
    return _SCALARS.get(field.type)


def json_name_default(name: str) -> str:
    """protoc's default json_name: lowerCamelCase of the field name (underscores dropped, next letter upper)."""
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


def _quote(value: str | bytes) -> str:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return '"' + text_encoding.CEscape(raw, as_utf8=isinstance(value, str)) + '"'


class _Printer:
    def __init__(self, file: descriptor_pb2.FileDescriptorProto, pool: DescriptorPool) -> None:
        self.file = file
        self.pool = pool
        self.lines: list[str] = []
        self.syntax = file.syntax or "proto2"

    # ------------------------------------------------------------ options

    def _options(self, options: Any) -> list[tuple[str, str]]:
        """(name, value) of every option set in `options`, custom ones as `(full.name)`."""
        if not options.ByteSize():
            return []
        try:
            cls = GetMessageClass(self.pool.FindMessageTypeByName(options.DESCRIPTOR.full_name))
            parsed = cls.FromString(options.SerializeToString())
        except Exception as exc:
            raise PrintError(f"options {options.DESCRIPTOR.name}: {exc}") from None
        if len(UnknownFieldSet(parsed)):
            raise PrintError(f"an option of {options.DESCRIPTOR.name} is an extension no import defines")
        out = []
        for fd, value in parsed.ListFields():
            name = f"({fd.full_name})" if fd.is_extension else fd.name
            values = list(value) if fd.is_repeated else [value]
            out += [(name, self._value(fd, v)) for v in values]
        return out

    @staticmethod
    def _value(fd: Any, value: Any) -> str:
        if fd.type == fd.TYPE_MESSAGE or fd.type == fd.TYPE_GROUP:
            return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
        if fd.type == fd.TYPE_ENUM:
            enum_value = fd.enum_type.values_by_number.get(value)
            return enum_value.name if enum_value is not None else str(value)
        if fd.type == fd.TYPE_BOOL:
            return "true" if value else "false"
        if fd.type in (fd.TYPE_STRING, fd.TYPE_BYTES):
            return _quote(value)
        if fd.type in (fd.TYPE_FLOAT, fd.TYPE_DOUBLE):
            text = repr(float(value))
            return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(text, text)
        return str(value)

    def _option_lines(self, options: Any, depth: int) -> None:
        for name, value in self._options(options):
            self._line(depth, f"option {name} = {value};")

    # ------------------------------------------------------------ output

    def _line(self, depth: int, text: str = "") -> None:
        self.lines.append(_INDENT * depth + text if text else "")

    def print(self) -> str:
        f = self.file
        if self.syntax == "editions":
            edition = descriptor_pb2.Edition.Name(f.edition).removeprefix("EDITION_")
            self._line(0, f'edition = "{edition}";')
        else:
            self._line(0, f'syntax = "{self.syntax}";')
        if f.package:
            self._line(0, f"package {f.package};")
        public, weak = set(f.public_dependency), set(f.weak_dependency)
        for i, dep in enumerate(f.dependency):
            kind = "public " if i in public else "weak " if i in weak else ""
            self._line(0, f"import {kind}{_quote(dep)};")
        for name in getattr(f, "option_dependency", ()):
            self._line(0, f"import option {_quote(name)};")
        self._option_lines(f.options, 0)
        for message in f.message_type:
            self._line(0)
            self._message(message, 0)
        for enum in f.enum_type:
            self._line(0)
            self._enum(enum, 0)
        if len(f.extension):
            self._line(0)
        self._extensions(f.extension, 0)
        for service in f.service:
            self._line(0)
            self._service(service)
        return "\n".join(self.lines) + "\n"

    def _type(self, field: Any) -> str:
        scalar = _SCALARS.get(field.type) if field.type not in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP) else None
        if scalar:
            return scalar
        if not field.type_name:
            raise PrintError(f"field {field.name} has no type")
        return field.type_name

    def _label(self, field: Any, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == F.LABEL_REPEATED:
            return "repeated "
        if self.syntax == "editions":
            return ""
        if self.syntax == "proto3":
            return "optional " if field.proto3_optional else ""
        return "required " if field.label == F.LABEL_REQUIRED else "optional "

    def _field_options(self, field: Any) -> str:
        parts = []
        if field.HasField("default_value"):
            if field.type == F.TYPE_STRING:
                default = _quote(field.default_value)
            elif field.type == F.TYPE_BYTES:
                default = '"' + field.default_value + '"'  # already C-escaped in the descriptor
            else:
                default = field.default_value
            parts.append(f"default = {default}")
        if field.HasField("json_name") and field.json_name != json_name_default(field.name):
            parts.append(f"json_name = {_quote(field.json_name)}")
        parts += [f"{name} = {value}" for name, value in self._options(field.options)]
        return f" [{', '.join(parts)}]" if parts else ""

    def _field(self, field: Any, depth: int, nested: dict[str, Any], in_oneof: bool) -> None:
        entry = nested.get(field.type_name) if field.type == F.TYPE_MESSAGE else None
        options = self._field_options(field)
        if entry is not None and entry.options.map_entry:
            key, value = entry.field[0], entry.field[1]
            self._line(depth, f"map<{self._type(key)}, {self._type(value)}> {field.name} = {field.number}{options};")
            return
        label = self._label(field, in_oneof)
        if field.type == F.TYPE_GROUP:
            group = nested.get(field.type_name)
            if group is None:
                raise PrintError(f"group {field.name}: its message is not nested where it is declared")
            self._line(depth, f"{label}group {group.name} = {field.number}{options} {{")
            self._body(group, depth + 1, field.type_name)
            self._line(depth, "}")
            return
        self._line(depth, f"{label}{self._type(field)} {field.name} = {field.number}{options};")

    def _message(self, message: Any, depth: int, scope: str | None = None) -> None:
        full = f"{scope or ('.' + self.file.package if self.file.package else '')}.{message.name}"
        self._line(depth, f"message {message.name} {{")
        self._body(message, depth + 1, full)
        self._line(depth, "}")

    def _body(self, message: Any, depth: int, full: str) -> None:
        nested = {f"{full}.{n.name}": n for n in message.nested_type}
        self._option_lines(message.options, depth)
        real_oneofs = {f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional}
        printed_oneofs: set[int] = set()
        for field in message.field:
            index = field.oneof_index if field.HasField("oneof_index") else None
            if index is not None and index in real_oneofs:
                if index in printed_oneofs:
                    continue
                printed_oneofs.add(index)
                oneof = message.oneof_decl[index]
                self._line(depth, f"oneof {oneof.name} {{")
                self._option_lines(oneof.options, depth + 1)
                for member in message.field:
                    if member.HasField("oneof_index") and member.oneof_index == index:
                        self._field(member, depth + 1, nested, True)
                self._line(depth, "}")
            else:
                self._field(field, depth, nested, False)
        groups = {f.type_name for f in message.field if f.type == F.TYPE_GROUP}
        groups |= {f.type_name for f in message.extension if f.type == F.TYPE_GROUP}
        for name, child in nested.items():
            if child.options.map_entry or name in groups:
                continue
            self._message(child, depth, full)
        for enum in message.enum_type:
            self._enum(enum, depth)
        for r in message.extension_range:
            end = "max" if r.end - 1 == _MESSAGE_MAX else str(r.end - 1)
            span = str(r.start) if r.end - 1 == r.start else f"{r.start} to {end}"
            options = self._options(r.options)
            suffix = f" [{', '.join(f'{n} = {v}' for n, v in options)}]" if options else ""
            self._line(depth, f"extensions {span}{suffix};")
        self._reserved(message.reserved_range, message.reserved_name, depth, exclusive=True, top=_MESSAGE_MAX)
        self._extensions(message.extension, depth, nested)

    def _reserved(self, ranges: Any, names: Any, depth: int, exclusive: bool, top: int) -> None:
        spans = []
        for r in ranges:
            end = r.end - 1 if exclusive else r.end
            spans.append(str(r.start) if end == r.start else f"{r.start} to {'max' if end == top else end}")
        if spans:
            self._line(depth, f"reserved {', '.join(spans)};")
        if names:
            if self.syntax == "editions":
                self._line(depth, f"reserved {', '.join(names)};")
            else:
                self._line(depth, f"reserved {', '.join(_quote(n) for n in names)};")

    def _extensions(self, fields: Any, depth: int, nested: dict[str, Any] | None = None) -> None:
        by_extendee: dict[str, list[Any]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, members in by_extendee.items():
            self._line(depth, f"extend {extendee} {{")
            for field in members:
                self._field(field, depth + 1, nested or {}, False)
            self._line(depth, "}")

    def _enum(self, enum: Any, depth: int) -> None:
        self._line(depth, f"enum {enum.name} {{")
        self._option_lines(enum.options, depth + 1)
        for value in enum.value:
            options = self._options(value.options)
            suffix = f" [{', '.join(f'{n} = {v}' for n, v in options)}]" if options else ""
            self._line(depth + 1, f"{value.name} = {value.number}{suffix};")
        self._reserved(enum.reserved_range, enum.reserved_name, depth + 1, exclusive=False, top=_ENUM_MAX)
        self._line(depth, "}")

    def _service(self, service: Any) -> None:
        self._line(0, f"service {service.name} {{")
        self._option_lines(service.options, 1)
        for method in service.method:
            request = ("stream " if method.client_streaming else "") + method.input_type
            response = ("stream " if method.server_streaming else "") + method.output_type
            head = f"rpc {method.name}({request}) returns ({response})"
            options = self._options(method.options)
            if options:
                self._line(1, head + " {")
                for name, value in options:
                    self._line(2, f"option {name} = {value};")
                self._line(1, "}")
            else:
                self._line(1, head + ";")
        self._line(0, "}")


def to_text(file: descriptor_pb2.FileDescriptorProto, pool: DescriptorPool) -> str:
    """`file` as .proto text; `pool` holds `file`'s imports and descriptor.proto (for its options)."""
    return _Printer(file, pool).print()
