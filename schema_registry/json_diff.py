"""The differences between two JSON Schemas, by Confluent's rules (its `json.diff` package, 7.x): a schema
is first read as the Everit library reads it (a string, number, object, array, boolean or null schema, an
enum, a const, a `not`, an `allOf`/`anyOf`/`oneOf` combination, a `$ref` followed to its target, `{}`,
`true` or `false`); `compare(original, update)` then lists every `Difference` (a type and a JSON path),
one function per keyword family. A difference is compatible when its type is in COMPATIBLE; the update can
read what the original wrote when every difference is.

Invariants: a `$ref` cycle is met at most once per pair of schemas (a pair met again while being compared
is taken as compatible, then re-checked to a fixpoint as Confluent does); the work is bounded by MAX_PAIRS
compared pairs over all passes (TooComplex past it).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

import re2

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False

MAX_PAIRS = 10_000  # about a second of work at worst

COMPATIBLE = frozenset("""
    ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
    MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
    MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED
    EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED
    MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED
    DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED
    MAX_PROPERTIES_INCREASED MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
    ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED
    PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED UNIQUE_ITEMS_REMOVED
    ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED
    ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
    ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL
    ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED
""".split())


class TooComplex(Exception):
    """More than MAX_PAIRS pairs of schemas compared, or nesting deeper than the interpreter's stack."""


# ==================================================================== differences and their descriptions

def _types(text: str) -> frozenset[str]:
    return frozenset(text.split())


_KEYWORD_ADDED_OR_REMOVED = _types("""MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED
    MULTIPLE_OF_ADDED MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED
    MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED MIN_ITEMS_ADDED
    UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED ADDITIONAL_PROPERTIES_REMOVED""")
_VALUE_INCREASED = _types("""MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED
    MIN_PROPERTIES_INCREASED MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED""")
_VALUE_DECREASED = _types("""MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED EXCLUSIVE_MAXIMUM_DECREASED
    MAX_PROPERTIES_DECREASED""")
_VALUE_CHANGED = _types("PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED")
_TYPE_NARROWED = _types("""ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED
    ADDITIONAL_PROPERTIES_NARROWED""")
_TYPE_EXTENDED = _types("DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED")
_TYPE_CHANGED = _types("""TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED
    ENUM_ARRAY_CHANGED""")
_DESCRIPTIONS: list[tuple[frozenset[str], str]] = [
    (_KEYWORD_ADDED_OR_REMOVED, "The keyword at path '{p}' in the {r} schema is not present in the {w} schema"),
    (_VALUE_INCREASED, "The value at path '{p}' in the {r} schema is more than its value in the {w} schema"),
    (_VALUE_DECREASED, "The value at path '{p}' in the {r} schema is less than its value in the {w} schema"),
    (_VALUE_CHANGED, "The value at path '{p}' is different between the {r} and {w} schema"),
    (_TYPE_NARROWED, "An array or combined type at path '{p}' has fewer elements in the {r} schema than the {w} "
                     "schema"),
    (_TYPE_EXTENDED, "An array or combined type at path '{p}' has more elements in the {r} schema than the {w} "
                     "schema"),
    (_TYPE_CHANGED, "A type at path '{p}' is different between the {r} schema and the {w} schema"),
    (_types("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL"),
     "The {r} schema has an open content model and has a property or item at path '{p}' which is missing in "
     "the {w} schema"),
    (_types("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"),
     "The {r} schema has an unopen content model and has a required property at path '{p}' which is missing "
     "in the {w} schema"),
    (_types("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"),
     "The {r} has a closed content model and is missing a property or item present at path '{p}' in the {w} "
     "schema"),
    (_types("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL "
            "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
     "A property or item is missing in the {r} schema but present at path '{p}' in the {w} schema and is not "
     "covered by its partially open content model"),
    (_types("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL "
            "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"),
     "The {r} schema has a property or item at path '{p}' which is missing in the {w} schema and is not "
     "covered by its partially open content model"),
]


@dataclass(frozen=True)
class Difference:
    type: str
    path: str  # "#/properties/name/maxLength"; "#/" is the root

    def message(self, reader: str, writer: str) -> str:
        """Confluent's detail string (its quoting included), `reader` and `writer` being "new"/"old"."""
        template = next((t for types, t in _DESCRIPTIONS if self.type in types), "")
        description = template.format(p=self.path, r=reader, w=writer)
        return f'{{errorType:"{self.type}", description:"{description}\'}}'


# ==================================================================== schemas as Everit reads them

_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "prefixItems")
_OBJECT_KEYWORDS = ("properties", "patternProperties", "additionalProperties", "required", "minProperties",
                    "maxProperties", "dependencies", "propertyNames", "dependentRequired", "dependentSchemas")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_TYPE_KINDS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean",
               "null": "null", "object": "object", "array": "array"}


@dataclass(eq=False)
class Node:
    """One schema: `kind` is Everit's class ('string', 'number', 'boolean', 'null', 'object', 'array', 'enum',
    'const', 'not', 'combined', 'empty', 'true', 'false', or 'ref' for a `$ref` that does not resolve);
    `raw` the JSON it was read from; `own` whether the title, description, default and id are its own (not
    when it is one of the schemas Everit splits an object into)."""
    kind: str
    raw: Any
    loader: "Loader"
    resolver: Any
    own: bool = True
    integer: bool = False
    criterion: str = ""
    built: list["Node"] | None = None  # a combination's schemas, once read
    part_raws: list[Any] = field(default_factory=list)  # ... or the JSON they are read from when first needed

    @property
    def parts(self) -> list["Node"]:
        if self.built is None:  # read lazily: a branch may refer back to this very schema
            self.built = [self.child(raw) for raw in self.part_raws]
        return self.built

    def child(self, raw: Any) -> "Node":
        return self.loader.load(raw, self.resolver)

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default) if isinstance(self.raw, dict) else default

    def common(self, key: str) -> Any:
        return self.get(key) if self.own else None

    def signature(self) -> tuple:
        return self.kind, self.integer, self.criterion, _canonical(self.raw)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Loader:
    """Reads JSON (sub)schemas into Nodes, each JSON object once (a `$ref` cycle meets the same Node)."""

    def __init__(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._keep: list[Any] = []  # the JSON read, alive while its id() keys a Node

    def load(self, raw: Any, resolver: Any) -> Node:
        for _hop in range(64):
            if not (isinstance(raw, dict) and isinstance(raw.get("$ref"), str)):
                break
            try:
                resolved = resolver.lookup(raw["$ref"])
            except Exception:  # unresolvable: compared by its reference text
                return self._cached(raw, lambda: Node("ref", raw, self, resolver))
            raw, resolver = resolved.contents, resolved.resolver
        else:  # a chain of references that never reaches a schema
            return self._cached(raw, lambda: Node("ref", raw, self, resolver))
        return self._cached(raw, lambda: self._read(raw, resolver))

    def _cached(self, raw: Any, make: Callable[[], Node]) -> Node:
        node = self._nodes.get(id(raw))
        if node is None:
            node = self._nodes[id(raw)] = make()
            self._keep.append(raw)
        return node

    def _read(self, raw: Any, resolver: Any) -> Node:
        if raw is True or raw is False:
            return Node("true" if raw else "false", raw, self, resolver)
        if not isinstance(raw, dict):
            return Node("empty", {}, self, resolver)
        parts: list[Node] = []
        if "enum" in raw:
            parts.append(Node("enum", raw, self, resolver, own=False))
        for criterion in ("allOf", "anyOf", "oneOf"):
            if isinstance(raw.get(criterion), list):
                parts.append(Node("combined", raw, self, resolver, own=False, criterion=criterion,
                                  part_raws=raw[criterion]))
        if "not" in raw:
            parts.append(Node("not", raw, self, resolver, own=False))
        if "const" in raw:
            parts.append(Node("const", raw, self, resolver, own=False))
        declared = raw.get("type")
        if isinstance(declared, str) and declared in _TYPE_KINDS:
            parts.append(self._typed(raw, resolver, declared))
        elif isinstance(declared, list):
            parts.append(Node("combined", raw, self, resolver, own=False, criterion="anyOf",
                              built=[self._typed(raw, resolver, t) for t in declared if t in _TYPE_KINDS]))
        elif declared is None:
            for keywords, kind in ((_ARRAY_KEYWORDS, "array"), (_OBJECT_KEYWORDS, "object"),
                                   (_NUMBER_KEYWORDS, "number"), (_STRING_KEYWORDS, "string")):
                if any(k in raw for k in keywords):
                    parts.append(Node(kind, raw, self, resolver, own=False))
        if not parts:
            return Node("empty", raw, self, resolver)
        if len(parts) == 1:
            parts[0].own = True
            return parts[0]
        return Node("combined", raw, self, resolver, criterion="allOf", built=parts)

    def _typed(self, raw: dict, resolver: Any, declared: str) -> Node:
        return Node(_TYPE_KINDS[declared], raw, self, resolver, own=False, integer=declared == "integer")


# ==================================================================== the comparison

class _Shared:
    """What one comparison's contexts share: the memo of pairs compared, the pairs in progress, the pairs
    a previous pass found incompatible, and the work done."""

    def __init__(self, seed: dict, work: int = 0) -> None:
        self.memo: dict[tuple[int, int], list[Difference]] = {}
        self.pairs: dict[tuple[int, int], tuple[Node, Node]] = {}
        self.in_progress: set[tuple[int, int]] = set()
        self.seed = seed
        self.optimistic = False
        self.work = work  # pairs compared, over every pass


class Context:
    def __init__(self, shared: _Shared, path: tuple[str, ...] = ()) -> None:
        self.shared = shared
        self.path = path
        self.diffs: list[Difference] = []

    def sub(self, *more: str) -> "Context":
        return Context(self.shared, self.path + more)

    def add(self, kind: str, *attribute: str) -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join(self.path + attribute)))

    def compatible(self) -> bool:
        return all(d.type in COMPATIBLE for d in self.diffs)

    def rebased(self, relative: list[Difference]) -> None:
        prefix = "#/" + "/".join(self.path)
        for d in relative:
            path = prefix if len(d.path) <= 2 else (d.path if not self.path else f"{prefix}/{d.path[2:]}")
            self.diffs.append(Difference(d.type, path))


def compare(original: Node | None, update: Node | None) -> list[Difference]:
    """Every difference from `original` to `update` (Confluent's SchemaDiff.compare). TooComplex past
    MAX_PAIRS compared pairs."""
    seed: dict = {}
    passes = work = 0
    alive = []  # every pass's pairs, so that no id() in the seed is reused
    while True:
        shared = _Shared(seed, work)
        alive.append(shared.pairs)
        ctx = Context(shared)
        try:
            _compare(ctx, original, update)
        except RecursionError:
            raise TooComplex("the schemas nest too deeply to be compared") from None
        incompatible = {k: v for k, v in shared.memo.items() if any(d.type not in COMPATIBLE for d in v)}
        passes, work = passes + 1, shared.work
        if not shared.optimistic or incompatible.keys() == seed.keys() or passes > 8:
            return ctx.diffs
        seed = incompatible


def _compare(ctx: Context, original: Node | None, update: Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    shared = ctx.shared
    key = (id(original), id(update))
    cached = shared.memo.get(key)
    if cached is None:
        if key in shared.in_progress:  # a cycle: as the seed says, else taken as compatible for this pass
            if key in shared.seed:
                ctx.rebased(shared.seed[key])
            else:
                shared.optimistic = True
            return
        shared.work += 1
        if shared.work > MAX_PAIRS:
            raise TooComplex(f"more than {MAX_PAIRS} pairs of schemas to compare")
        shared.in_progress.add(key)
        shared.pairs[key] = (original, update)  # alive while its ids key the memo
        try:
            pair = Context(shared)
            _compare_types(pair, original, update)
            cached = shared.memo[key] = pair.diffs
        finally:
            shared.in_progress.discard(key)
    ctx.rebased(cached)


def _compare_types(ctx: Context, original: Node, update: Node) -> None:
    if original.kind != "combined" and update.kind == "combined":
        if _into_combined(ctx, original, update):
            return
    elif original.kind == "combined" and update.kind != "combined":
        if _out_of_combined(ctx, original, update):
            return
    if original.kind != update.kind:
        if original.kind == "false" or update.kind in ("empty", "true"):
            return
        if original.get("connect.type") == "bytes" == update.get("connect.type"):
            return
        ctx.add("TYPE_CHANGED")
        return
    if (original.common("$id") or original.common("id")) != (update.common("$id") or update.common("id")):
        ctx.add("ID_CHANGED")
    for keyword, kind in (("title", "TITLE_CHANGED"), ("description", "DESCRIPTION_CHANGED"),
                          ("default", "DEFAULT_CHANGED")):
        if original.common(keyword) != update.common(keyword):
            ctx.add(kind)
    _BY_KIND.get(original.kind, _opaque)(ctx, original, update)


def _into_combined(ctx: Context, original: Node, update: Node) -> bool:
    """A schema that became one branch of a union (or a singleton combination) is compatible if that
    branch is."""
    if len(update.parts) == 1:
        sub = ctx.sub()
        _compare(sub, original, update.parts[0])
        if sub.compatible():
            ctx.diffs += sub.diffs
            return True
    elif update.criterion in ("anyOf", "oneOf"):
        for part in update.parts:
            sub = ctx.sub()
            _compare(sub, original, part)
            if sub.compatible():
                ctx.diffs += sub.diffs
                ctx.add("SUM_TYPE_EXTENDED")
                return True
    return False


def _out_of_combined(ctx: Context, original: Node, update: Node) -> bool:
    """A product (allOf) reduced to one of its schemas is compatible if that schema is."""
    if len(original.parts) == 1:
        sub = ctx.sub()
        _compare(sub, original.parts[0], update)
        if sub.compatible():
            ctx.diffs += sub.diffs
            return True
    elif original.criterion == "allOf":
        for part in original.parts:
            sub = ctx.sub()
            _compare(sub, part, update)
            if sub.compatible():
                ctx.diffs += sub.diffs
                ctx.add("PRODUCT_TYPE_NARROWED")
                return True
    return False


def _opaque(ctx: Context, original: Node, update: Node) -> None:
    """Boolean, null, `{}`, `true` and `false` schemas have nothing more to compare; a `$ref` that does not
    resolve is compared by its text."""
    if original.kind == "ref" and original.get("$ref") != update.get("$ref"):
        ctx.add("TYPE_CHANGED")


def _limit(ctx: Context, keyword: str, prefix: str, old: Any, new: Any) -> None:
    """`prefix`_ADDED / _REMOVED / _INCREASED / _DECREASED for a numeric keyword."""
    old, new = _number(old), _number(new)
    if old == new:
        return
    if old is None:
        ctx.add(f"{prefix}_ADDED", keyword)
    elif new is None:
        ctx.add(f"{prefix}_REMOVED", keyword)
    elif old < new:
        ctx.add(f"{prefix}_INCREASED", keyword)
    elif old > new:
        ctx.add(f"{prefix}_DECREASED", keyword)


def _number(value: Any) -> int | float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _strings(ctx: Context, original: Node, update: Node) -> None:
    _limit(ctx, "maxLength", "MAX_LENGTH", original.get("maxLength"), update.get("maxLength"))
    _limit(ctx, "minLength", "MIN_LENGTH", original.get("minLength"), update.get("minLength"))
    old, new = original.get("pattern"), update.get("pattern")
    if old is None and new is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif old is not None and new is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif old != new:
        ctx.add("PATTERN_CHANGED", "pattern")


def _numbers(ctx: Context, original: Node, update: Node) -> None:
    for keyword, prefix in (("maximum", "MAXIMUM"), ("minimum", "MINIMUM"),
                            ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"), ("exclusiveMinimum", "EXCLUSIVE_MINIMUM")):
        _limit(ctx, keyword, prefix, original.get(keyword), update.get(keyword))
    old, new = _decimal(original.get("multipleOf")), _decimal(update.get("multipleOf"))
    if old != new:
        if old is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif new is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif _divides(old, new):
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif _divides(new, old):
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if original.integer != update.integer:
        ctx.add("TYPE_EXTENDED" if original.integer else "TYPE_NARROWED")


def _decimal(value: Any) -> Decimal | None:
    """A finite number as an exact decimal (multipleOf 0.1 is 1/10, not the float nearest it)."""
    if _number(value) is None:
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _divides(divisor: Decimal, value: Decimal) -> bool:
    try:
        return divisor != 0 and value % divisor == 0
    except InvalidOperation:  # a quotient past the decimal context's precision
        return False


def _enums(ctx: Context, original: Node, update: Node) -> None:
    old = {_canonical(v) for v in original.get("enum") or []}
    new = {_canonical(v) for v in update.get("enum") or []}
    if old != new:
        ctx.add("ENUM_ARRAY_EXTENDED" if new >= old else "ENUM_ARRAY_NARROWED" if old >= new
                else "ENUM_ARRAY_CHANGED", "enum")


def _consts(ctx: Context, original: Node, update: Node) -> None:
    if _canonical(original.get("const")) != _canonical(update.get("const")):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _nots(ctx: Context, original: Node, update: Node) -> None:
    """`not` reverses the comparison: what the old one excluded, the new one must exclude at least."""
    sub = ctx.sub("not")
    _compare(sub, update.child(update.get("not")), original.child(original.get("not")))
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED", "not")


def _combined(ctx: Context, original: Node, update: Node) -> None:
    """Same criterion (or a widening one); then the old branches are matched one to one with compatible
    new branches (a maximum bipartite matching), which must cover the smaller side."""
    if original.criterion != update.criterion:
        single_old, single_new = len(original.parts) == 1, len(update.parts) == 1
        if update.criterion == "anyOf" or (single_old and single_new) \
                or (single_old and update.criterion == "oneOf") \
                or (single_new and original.criterion == "allOf"):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    olds = list({p.signature(): p for p in original.parts}.values())
    news = list({p.signature(): p for p in update.parts}.values())
    if len(olds) < len(news):
        ctx.add("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(olds) > len(news):
        ctx.add("SUM_TYPE_NARROWED" if original.criterion in ("anyOf", "oneOf") else "PRODUCT_TYPE_NARROWED")
    edges: dict[int, dict[int, list[Difference]]] = {}
    for i, old in enumerate(olds):
        for j, new in enumerate(news):
            sub = ctx.sub(f"{original.criterion}/{i}")
            _compare(sub, old, new)
            if sub.compatible():
                edges.setdefault(i, {})[j] = sub.diffs
    matching = _max_matching(edges)
    for j, i in sorted(matching.items(), key=lambda pair: pair[1]):
        ctx.diffs += edges[i][j]
    if len(matching) < min(len(olds), len(news)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _max_matching(edges: dict[int, dict[int, Any]]) -> dict[int, int]:
    """A maximum matching (right -> left) of the bipartite graph `edges` (left -> right -> value)."""
    match: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j not in seen:
                seen.add(j)
                if j not in match or augment(match[j], seen):
                    match[j] = i
                    return True
        return False

    for i in edges:
        augment(i, set())
    return match


# -------------------------------------------------------------------- objects

def _dict(node: Node, key: str) -> dict:
    value = node.get(key)
    return value if isinstance(value, dict) else {}


def _required(node: Node) -> set[str]:
    value = node.get("required")
    return set(value) if isinstance(value, list) else set()


def _additional(node: Node, keyword: str) -> tuple[bool, Any]:
    return _flag(node.get(keyword))


def _has_default(raw: Any) -> bool:
    return isinstance(raw, dict) and "default" in raw


def _open_object(node: Node) -> bool:
    permits, schema = _additional(node, "additionalProperties")
    return permits and schema is None and not _dict(node, "patternProperties")


def _partial_object(node: Node, name: str) -> Any:
    """The schema a partially open object gives an undeclared property `name`, if any: the first pattern
    property whose pattern is found in the name (RE2, linear time: no schema's pattern can stall the event
    loop; a pattern RE2 does not take matches nothing), else the additionalProperties schema."""
    for pattern, schema in _dict(node, "patternProperties").items():
        try:
            if re2.compile(pattern, _RE2_OPTIONS).search(name):
                return schema
        except re2.error:
            continue
    return _additional(node, "additionalProperties")[1]


def _objects(ctx: Context, original: Node, update: Node) -> None:
    _object_required(ctx, original, update)
    _object_properties(ctx, original, update)
    _object_dependencies(ctx, original, update)
    _object_additional(ctx, original, update)
    _limit(ctx, "maxProperties", "MAX_PROPERTIES", original.get("maxProperties"), update.get("maxProperties"))
    _limit(ctx, "minProperties", "MIN_PROPERTIES", original.get("minProperties"), update.get("minProperties"))


def _object_required(ctx: Context, original: Node, update: Node) -> None:
    old_props, new_props = _dict(original, "properties"), _dict(update, "properties")
    old_required, new_required = _required(original), _required(update)
    for name in old_props:
        if name not in new_props:
            continue
        if name in old_required and name not in new_required:
            ctx.add("REQUIRED_ATTRIBUTE_REMOVED", "required", name)
        elif name not in old_required and name in new_required:
            ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(new_props[name])
                    else "REQUIRED_ATTRIBUTE_ADDED", "required", name)


def _object_properties(ctx: Context, original: Node, update: Node) -> None:
    old_props, new_props = _dict(original, "properties"), _dict(update, "properties")
    for name in dict.fromkeys([*old_props, *new_props]):
        at = ctx.sub("properties", name)
        if name not in new_props:
            _property_removed(at, original.child(old_props[name]), update, name)
        elif name not in old_props:
            _property_added(at, original, update, name)
        else:
            _compare(at, original.child(old_props[name]), update.child(new_props[name]))
        ctx.diffs += at.diffs


def _property_removed(at: Context, old: Node, update: Node, name: str) -> None:
    if _open_object(update):
        at.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial_object(update, name)
    if partial is not None:
        sub = at.sub()
        _compare(sub, old, update.child(partial))
        at.diffs += sub.diffs
        at.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
               else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif old.kind == "false":
        at.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        at.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(at: Context, original: Node, update: Node, name: str) -> None:
    raw = _dict(update, "properties")[name]
    new = update.child(raw)
    if _open_object(original):
        at.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if new.kind in ("empty", "true")
               else "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial_object(original, name)
    if partial is not None:
        sub = at.sub()
        _compare(sub, original.child(partial), new)
        at.diffs += sub.diffs
        at.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
               else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if name in _required(update):
        at.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if _has_default(raw)
               else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        at.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _dependencies(node: Node) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """(property dependencies, schema dependencies): `dependencies` (an array or a schema each), and the
    2019-09 split of it, `dependentRequired` and `dependentSchemas`."""
    arrays: dict[str, set[str]] = {}
    schemas: dict[str, Any] = {}
    for name, value in _dict(node, "dependencies").items():
        if isinstance(value, list):
            arrays[name] = set(value)
        else:
            schemas[name] = value
    arrays.update((k, set(v)) for k, v in _dict(node, "dependentRequired").items() if isinstance(v, list))
    schemas.update(_dict(node, "dependentSchemas"))
    return arrays, schemas


def _object_dependencies(ctx: Context, original: Node, update: Node) -> None:
    old_arrays, old_schemas = _dependencies(original)
    new_arrays, new_schemas = _dependencies(update)
    for name in dict.fromkeys([*old_arrays, *new_arrays]):
        old, new = old_arrays.get(name), new_arrays.get(name)
        if new is None:
            ctx.add("DEPENDENCY_ARRAY_REMOVED", "dependencies", name)
        elif old is None:
            ctx.add("DEPENDENCY_ARRAY_ADDED", "dependencies", name)
        elif old != new:
            ctx.add("DEPENDENCY_ARRAY_EXTENDED" if new >= old else "DEPENDENCY_ARRAY_NARROWED" if old >= new
                    else "DEPENDENCY_ARRAY_CHANGED", "dependencies", name)
    for name in dict.fromkeys([*old_schemas, *new_schemas]):
        if name not in new_schemas:
            ctx.add("DEPENDENCY_SCHEMA_REMOVED", "dependencies", name)
        elif name not in old_schemas:
            ctx.add("DEPENDENCY_SCHEMA_ADDED", "dependencies", name)
        else:
            at = ctx.sub("dependencies", name)
            _compare(at, original.child(old_schemas[name]), update.child(new_schemas[name]))
            ctx.diffs += at.diffs


def _object_additional(ctx: Context, original: Node, update: Node) -> None:
    _additional_diff(ctx, "additionalProperties", "PROPERTIES", original, update,
                     original.get("additionalProperties"), update.get("additionalProperties"))


def _flag(value: Any) -> tuple[bool, Any]:
    """(permits additional properties/items, their schema or None): a boolean is a flag, an object a schema."""
    if isinstance(value, bool):
        return value, None
    return True, value if isinstance(value, dict) else None


def _additional_diff(ctx: Context, keyword: str, what: str, original: Node, update: Node,
                     old_value: Any, new_value: Any) -> None:
    """ADDITIONAL_`what`_REMOVED when the update closes the model, _ADDED when it opens it, _NARROWED when a
    schema appears, _EXTENDED when it goes, else the two schemas compared."""
    at = ctx.sub(keyword)
    (old_permits, old_schema), (new_permits, new_schema) = _flag(old_value), _flag(new_value)
    if old_permits != new_permits:
        at.add(f"ADDITIONAL_{what}_{'ADDED' if new_permits else 'REMOVED'}")
    elif old_schema is None and new_schema is not None:
        at.add(f"ADDITIONAL_{what}_NARROWED")
    elif new_schema is None and old_schema is not None:
        at.add(f"ADDITIONAL_{what}_EXTENDED")
    elif old_schema is not None:
        _compare(at, original.child(old_schema), update.child(new_schema))
    ctx.diffs += at.diffs


# -------------------------------------------------------------------- arrays

def _tuple_items(node: Node) -> tuple[list[Any], Any, str]:
    """(positional item schemas, the schema of every item or None, the keyword of additional items)."""
    if isinstance(node.get("prefixItems"), list):
        return node.get("prefixItems"), None, "items"
    items = node.get("items")
    if isinstance(items, list):
        return items, None, "additionalItems"
    return [], items, "additionalItems"


def _open_array(node: Node, keyword: str) -> bool:
    permits, schema = _additional(node, keyword)
    return permits and schema is None


def _arrays(ctx: Context, original: Node, update: Node) -> None:
    old_tuple, old_all, old_extra = _tuple_items(original)
    new_tuple, new_all, new_extra = _tuple_items(update)
    at = ctx.sub("items")
    _compare(at, None if old_all is None else original.child(old_all),
             None if new_all is None else update.child(new_all))
    ctx.diffs += at.diffs
    _array_tuples(ctx, original, update, old_tuple, new_tuple, old_extra, new_extra)
    _additional_diff(ctx, "additionalItems", "ITEMS", original, update,
                     original.get(old_extra), update.get(new_extra))
    _limit(ctx, "maxItems", "MAX_ITEMS", original.get("maxItems"), update.get("maxItems"))
    _limit(ctx, "minItems", "MIN_ITEMS", original.get("minItems"), update.get("minItems"))
    old_unique, new_unique = original.get("uniqueItems") is True, update.get("uniqueItems") is True
    if old_unique != new_unique:
        ctx.add("UNIQUE_ITEMS_REMOVED" if old_unique else "UNIQUE_ITEMS_ADDED", "uniqueItems")


def _array_tuples(ctx: Context, original: Node, update: Node, olds: list, news: list,
                  old_extra: str, new_extra: str) -> None:
    for index in range(max(len(olds), len(news))):
        at = ctx.sub(f"items/{index}")
        if index < len(olds) and index < len(news):
            _compare(at, original.child(olds[index]), update.child(news[index]))
        elif index < len(olds):
            _item_removed(at, original.child(olds[index]), update, new_extra)
        else:
            _item_added(at, original, update.child(news[index]), old_extra)
        ctx.diffs += at.diffs


def _item_removed(at: Context, old: Node, update: Node, keyword: str) -> None:
    if _open_array(update, keyword):
        at.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _additional(update, keyword)[1]
    if partial is not None:
        sub = at.sub()
        _compare(sub, old, update.child(partial))
        at.diffs += sub.diffs
        at.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
               else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif old.kind == "false":
        at.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        at.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(at: Context, original: Node, new: Node, keyword: str) -> None:
    if _open_array(original, keyword):
        at.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if new.kind in ("empty", "true")
               else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _additional(original, keyword)[1]
    if partial is not None:
        sub = at.sub()
        _compare(sub, original.child(partial), new)
        at.diffs += sub.diffs
        at.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
               else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        at.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


_BY_KIND: dict[str, Callable[[Context, Node, Node], None]] = {
    "string": _strings, "number": _numbers, "enum": _enums, "const": _consts, "not": _nots,
    "combined": _combined, "object": _objects, "array": _arrays,
}
