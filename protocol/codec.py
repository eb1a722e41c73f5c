"""Request body decoding with Apache Kafka's parse-time checks, over kafka-python's message schemas.

`decode_body` returns the same objects as kafka-python's generated decoder (`ApiMessage.decode`:
data-class instances, `tags`/`unknown_tags`, `bytes` for bytes fields, `None` for the zero uuid), but
the decoder is generated here, once per (message class, version), from the same schema fields, so
that it refuses what Kafka's generated readers (`*Data.read(Readable, short)`) refuse while parsing:

- a null (negative length) in a field that is not nullable at that version ("non-nullable field X
  was serialized as null"); array elements are never nullable. Kafka reads *any* negative length as
  null, so a non-compact array of length -5 is null too (kafka-python would return []);
- an array length larger than the bytes left ("Tried to allocate a collection of size N, but there
  are only M bytes remaining"), a string/bytes/tagged field running past the end of the frame, a
  compact string longer than 0x7fff, an unsigned varint longer than 5 bytes;
- compact lengths are Kafka's 32-bit ints: 0xffffffff (varint ff ff ff ff 0f) is -1, so length -2,
  which is null (answered like any other null), not a huge length.

A nested struct field is null when its presence byte is negative (Kafka: `readByte() < 0`).
Strings are decoded as Java does (`new String(bytes, UTF_8)`): malformed UTF-8 becomes U+FFFD, it
does not fail the request. Trailing bytes after the body are ignored, as Kafka does.

Kafka then closes the connection (SocketServer: "Exception while processing request"), which is what
the dispatcher does on DecodeError. The checks are inline in the generated code (a comparison per
length field), so they cost nothing measurable on Produce/Fetch; records bytes are not looked at.

One deliberate difference from kafka-python: a `records` field is a memoryview of the request frame,
not a copy (the frame is the broker's own buffer, so Produce patches offsets into it and writes it).
"""
from __future__ import annotations

import threading
import uuid
from struct import unpack_from

from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField
from kafka.protocol.schemas.fields.codecs.types import Bytes, String


class DecodeError(ValueError):
    """The body does not decode as the declared API/version (Kafka closes the connection)."""


def decode_body(message_class: type, data: memoryview, version: int, *, exact: bool = False):
    """Decode `data` as `message_class` at `version`; DecodeError where Kafka's parser throws.
    exact=True also refuses trailing bytes (for checking responses; Kafka ignores them in requests)."""
    decoder = _DECODERS.get((message_class, version))
    if decoder is None:
        decoder = _compile_message(message_class, version)
    try:
        message, end = decoder(data, 0)
    except DecodeError as exc:
        raise DecodeError(f"{message_class.__name__} v{version}: {exc}") from None
    except Exception as exc:
        raise DecodeError(f"{message_class.__name__} v{version}: {exc!r}") from None
    if end > len(data):
        raise DecodeError(f"{message_class.__name__} v{version}: a length field runs {end - len(data)} bytes "
                          "past the end of the frame")
    if exact and end != len(data):
        raise DecodeError(f"{message_class.__name__} v{version}: {len(data) - end} trailing bytes")
    message._version = version
    return message


def decoder_source(message_class: type, version: int) -> str:
    """The generated decoder's Python source (for debugging and tests)."""
    return _generate(message_class, version)[0].source()


# ------------------------------------------------------------------------------------------------
# runtime helpers called by the generated code (slow paths only)

def _uvarint(data, pos: int) -> tuple[int, int]:
    """Kafka's ByteUtils.readUnsignedVarint: at most 5 bytes, the value as a Java int."""
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 28:
            raise DecodeError("illegal varint: more than 5 bytes")
    value &= 0xFFFFFFFF
    if value >= 0x80000000:
        value -= 0x100000000
    return value, pos


def _compact_length(data, pos: int) -> tuple[int, int]:
    """readUnsignedVarint() - 1 in Java int arithmetic."""
    value, pos = _uvarint(data, pos)
    value -= 1
    if value < -0x80000000:
        value += 0x100000000
    return value, pos


def _null(name: str):
    raise DecodeError(f"non-nullable field {name} was serialized as null")


def _too_many(n: int, remaining: int):
    raise DecodeError(f"Tried to allocate a collection of size {n}, but there are only {remaining} bytes remaining.")


def _underrun(kind: str, n: int, remaining: int):
    raise DecodeError(f"Error reading {kind} of {n} byte(s): only {remaining} byte(s) available")


def _bad_string_length(name: str, n: int):
    raise DecodeError(f"string field {name} had invalid length {n}")


def _tagged(obj, data, pos: int, end: int, known: dict):
    """A tagged-field section: known tags are parsed (as Kafka: the value's own length decides where
    it ends), unknown ones kept as bytes in obj.unknown_tags."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        entry = known.get(tag)
        if entry is None:
            if size < 0 or size > end - pos:
                _underrun("tagged field", size, end - pos)
            if obj.unknown_tags is None:
                obj.unknown_tags = {}
            obj.unknown_tags["_%d" % tag] = bytes(data[pos:pos + size])
            pos += size
        else:
            name, decode = entry
            value, pos = decode(data, pos, end)
            if obj.tags is None:
                obj.tags = set()
            obj.tags.add(name)
            setattr(obj, name, value)
    return pos


# ------------------------------------------------------------------------------------------------
# code generation

_DECODERS: dict[tuple[type, int], object] = {}
_LOCK = threading.Lock()


class _Ctx:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.globs: dict = {
            "unpack_from": unpack_from, "_uuid_cls": uuid.UUID, "_ZERO_UUID": uuid.UUID(int=0),
            "_uvarint": _uvarint, "_compact_length": _compact_length, "_null": _null, "_too_many": _too_many,
            "_underrun": _underrun, "_bad_string_length": _bad_string_length, "_tagged": _tagged,
        }
        self.n = 0

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"_{prefix}{self.n}"

    def emit(self, indent: str, line: str) -> None:
        self.lines.append(indent + line)

    def source(self) -> str:
        return "\n".join(self.lines)


def _emit_length(ctx: _Ctx, var: str, indent: str, compact: bool, fmt: str) -> None:
    """Read a length into `var`: compact = uvarint - 1 (one-byte fast path), else int16/int32."""
    if compact:
        ctx.emit(indent, f"{var} = data[pos]")
        ctx.emit(indent, f"if {var} < 0x80:")
        ctx.emit(indent, f"    pos += 1")
        ctx.emit(indent, f"    {var} -= 1")
        ctx.emit(indent, "else:")
        ctx.emit(indent, f"    {var}, pos = _compact_length(data, pos)")
    else:
        size = 2 if fmt == ">h" else 4
        ctx.emit(indent, f'{var} = unpack_from("{fmt}", data, pos)[0]')
        ctx.emit(indent, f"pos += {size}")


def _emit_null(ctx: _Ctx, target: str, indent: str, name: str, nullable: bool) -> None:
    if nullable:
        ctx.emit(indent, f"{target} = None")
    else:
        ctx.emit(indent, f"_null({name!r})")


def _emit_field(ctx: _Ctx, field, target: str, indent: str, version: int, flexible: bool,
                nullable: bool | None = None, name: str | None = None) -> None:
    """Decode `field` at data[pos] into the local `target`."""
    name = name or field._name
    if nullable is None:
        nullable = field.nullable_for_version_q(version)
    if isinstance(field, StructArrayField) or isinstance(field, ArrayField):
        n = ctx.var("n")
        _emit_length(ctx, n, indent, flexible, ">i")
        ctx.emit(indent, f"if {n} < 0:")
        _emit_null(ctx, target, indent + "    ", name, nullable)
        ctx.emit(indent, f"elif {n} > end - pos:")
        ctx.emit(indent, f"    _too_many({n}, end - pos)")
        ctx.emit(indent, "else:")
        inner = indent + "    "
        ctx.emit(inner, f"{target} = []")
        item = ctx.var("item")
        ctx.emit(inner, f"for _ in range({n}):")
        if isinstance(field, StructArrayField):
            _emit_struct(ctx, field.array_of, item, inner + "    ", version, flexible)
        else:
            # array elements are never nullable (Kafka: "non-nullable field X element ...")
            _emit_field(ctx, field.array_of, item, inner + "    ", version, flexible, nullable=False,
                        name=f"{name} element")
        ctx.emit(inner, f"    {target}.append({item})")
    elif isinstance(field, StructField):
        if nullable:
            ctx.emit(indent, "if data[pos] >= 0x80:")
            ctx.emit(indent, "    pos += 1")
            ctx.emit(indent, f"    {target} = None")
            ctx.emit(indent, "else:")
            ctx.emit(indent, "    pos += 1")
            indent += "    "
        _emit_struct(ctx, field, target, indent, version, flexible)
    elif isinstance(field, SimpleField):
        codec = field._type
        if isinstance(codec, String):
            ln = ctx.var("ln")
            _emit_length(ctx, ln, indent, flexible, ">h")
            ctx.emit(indent, f"if {ln} < 0:")
            _emit_null(ctx, target, indent + "    ", name, nullable)
            if flexible:
                ctx.emit(indent, f"elif {ln} > 0x7fff:")
                ctx.emit(indent, f"    _bad_string_length({name!r}, {ln})")
            ctx.emit(indent, f"elif {ln} > end - pos:")
            ctx.emit(indent, f'    _underrun("string", {ln}, end - pos)')
            ctx.emit(indent, "else:")
            ctx.emit(indent, f'    {target} = str(data[pos:pos + {ln}], "utf-8", "replace")')
            ctx.emit(indent, f"    pos += {ln}")
        elif codec is Bytes:
            ln = ctx.var("ln")
            _emit_length(ctx, ln, indent, flexible, ">i")
            ctx.emit(indent, f"if {ln} < 0:")
            _emit_null(ctx, target, indent + "    ", name, nullable)
            ctx.emit(indent, f"elif {ln} > end - pos:")
            ctx.emit(indent, f'    _underrun("byte array", {ln}, end - pos)')
            ctx.emit(indent, "else:")
            if field.type_str == "records":  # a view of the frame: Produce appends it without copying
                ctx.emit(indent, f"    {target} = data[pos:pos + {ln}]")
            else:
                ctx.emit(indent, f"    {target} = bytes(data[pos:pos + {ln}])")
            ctx.emit(indent, f"    pos += {ln}")
        else:
            # fixed-size values, uuid (zero uuid -> None, as kafka-python), bitfield: kafka-python's own
            # emitters; a short buffer raises struct.error / ValueError -> DecodeError
            saved = dict(ctx.globs)
            sub = _KpCtx(ctx)
            codec.emit_decode_from(sub, target, indent, compact=flexible)
            ctx.globs.update({k: v for k, v in sub.globs.items() if k not in saved})
    else:  # pragma: no cover - kafka-python has no other field kinds
        raise TypeError(f"unsupported schema field {field!r}")


class _KpCtx:
    """Adapter so kafka-python's codec emitters write into our context."""

    def __init__(self, ctx: _Ctx) -> None:
        self._ctx = ctx
        self.globs = ctx.globs

    def next_var(self, prefix: str = "v") -> str:
        return self._ctx.var(prefix)

    def emit(self, indent: str, line: str) -> None:
        self._ctx.emit(indent, line)


def _emit_struct(ctx: _Ctx, struct: StructField, target: str, indent: str, version: int, flexible: bool,
                 data_class=None) -> None:
    dc = ctx.var("dc")
    ctx.globs[dc] = data_class if data_class is not None else struct.data_class
    ctx.emit(indent, f"{target} = object.__new__({dc})")
    ctx.emit(indent, f"{target}._version = {version}")
    ctx.emit(indent, f"{target}.tags = None")
    ctx.emit(indent, f"{target}.unknown_tags = None")
    fields = struct.untagged_fields(version)
    i = 0
    while i < len(fields):
        field = fields[i]
        if field.is_batchable():
            run = []
            while i < len(fields) and fields[i].is_batchable():
                run.append(fields[i])
                i += 1
            names = [ctx.var("val") for _ in run]
            fmt = ">" + "".join(f._type.fmt for f in run)
            size = sum(f._type.size for f in run)
            ctx.emit(indent, f'{", ".join(names)}, = unpack_from("{fmt}", data, pos)')
            ctx.emit(indent, f"pos += {size}")
            for f, v in zip(run, names):
                ctx.emit(indent, f"{target}.{f.name} = {v}")
        else:
            v = ctx.var("val")
            _emit_field(ctx, field, v, indent, version, flexible)
            ctx.emit(indent, f"{target}.{field.name} = {v}")
            i += 1
    if flexible:
        known = {}
        for f in struct.tagged_fields(version)._fields:
            known[f.tag] = (f.name, _compile_field(f, version))
        kn = ctx.var("tags")
        ctx.globs[kn] = known
        ctx.emit(indent, "if data[pos] == 0:")
        ctx.emit(indent, "    pos += 1")
        ctx.emit(indent, "else:")
        ctx.emit(indent, f"    pos = _tagged({target}, data, pos, end, {kn})")


def _compile_field(field, version: int):
    """A standalone decoder f(data, pos, end) -> (value, pos) for one tagged field (always compact)."""
    ctx = _Ctx()
    ctx.lines.append("def _decode(data, pos, end):")
    _emit_field(ctx, field, "value", "    ", version, True)
    ctx.emit("    ", "return value, pos")
    exec(compile(ctx.source(), f"<minikafka-tagged:{field.name}_v{version}>", "exec"), ctx.globs)
    return ctx.globs["_decode"]


def _generate(message_class: type, version: int) -> tuple[_Ctx, str]:
    flexible = message_class.flexible_version_q(version)
    ctx = _Ctx()
    ctx.lines.append("def _decode(data, pos):")
    ctx.emit("    ", "end = len(data)")
    _emit_struct(ctx, message_class._struct, "obj", "    ", version, flexible, data_class=message_class[None])
    ctx.emit("    ", "return obj, pos")
    return ctx, f"<minikafka-decode:{message_class.__name__}_v{version}>"


def _compile_message(message_class: type, version: int):
    with _LOCK:
        decoder = _DECODERS.get((message_class, version))
        if decoder is None:
            ctx, filename = _generate(message_class, version)
            exec(compile(ctx.source(), filename, "exec"), ctx.globs)
            decoder = ctx.globs["_decode"]
            _DECODERS[(message_class, version)] = decoder
    return decoder
