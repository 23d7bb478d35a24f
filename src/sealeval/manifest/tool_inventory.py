"""A canonical, PHI-safe tool inventory: the ``tool_inventory`` manifest component.

The inventory records *which* tools an evaluated workflow may call and the
*shape* of their parameters, nothing else. It is built from tool names and
parameter schemas written in a small, structural subset of JSON Schema, and
it refuses (fails closed) any input that carries arguments, endpoints,
credentials, free-text descriptions, instance values or file-system paths.
Its openmed canonical JSON digest becomes the ``tool_inventory`` component
digest of a sealed workflow manifest.

Wire contract: ``sealeval.tool_inventory.v1`` (see
``contracts/sealeval.tool_inventory.v1.schema.json`` and
``docs/tool-inventory.md``).

Every refusal is a :class:`~sealeval.errors.ToolInventoryError` whose field is
built by this module from fixed words and ordinal positions in the input as
given (for example ``tools[3].parameters.properties[2].enum[0]``); no name,
key or value the caller submitted ever reaches an error message.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeAlias

from sealeval._validate import check_exact, thaw_json
from sealeval.canonical import decode, digest_openmed, encode_openmed
from sealeval.errors import CanonicalError, ToolInventoryError

__all__ = [
    "FORMATS",
    "MAX_INTEGER",
    "MAX_SCHEMA_DEPTH",
    "MAX_TOOLS",
    "SCHEMA_KEYWORDS",
    "TOOL_INVENTORY_SCHEMA",
    "TYPES",
    "ToolEntry",
    "ToolInventory",
    "build_tool_inventory",
    "tool_inventory_digest",
]

TOOL_INVENTORY_SCHEMA: Final = "sealeval.tool_inventory.v1"
#: Largest accepted number of tools.
MAX_TOOLS: Final = 1024
#: Deepest accepted schema nesting; a tool's ``parameters`` is level 1.
MAX_SCHEMA_DEPTH: Final = 32
#: JSON Schema ``type`` names accepted by ``type``.
TYPES: Final = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
#: The closed set of accepted ``format`` values.
FORMATS: Final = frozenset(
    {
        "date",
        "date-time",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "time",
        "uri",
        "uuid",
    }
)
#: Largest accepted magnitude of an integer (bounds, sizes and ``enum`` members).
MAX_INTEGER: Final = 2**63 - 1

_TOOL_KEYS: Final = frozenset({"name", "parameters"})
_DOCUMENT_KEYS: Final = frozenset({"schema_version", "tools"})
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
_TOKEN: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_LOCAL_REF: Final = re.compile(r"#/\$defs/([A-Za-z_][A-Za-z0-9_.-]{0,127})")
_DRIVE: Final = re.compile(r"[A-Za-z]:")
_SECRETISH: Final = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_HEXISH: Final = re.compile(r"[0-9A-Fa-f]{32,}")
_SECRET_PREFIXES: Final = ("sk-", "ghp_", "xox", "AKIA", "eyJ")
_SECRET_PREFIXES_CI: Final = ("bearer ", "-----begin")
_FIELD_LIMIT: Final = 128

#: A field name under construction: fixed words and ordinal positions only.
_Path: TypeAlias = tuple[str, ...]

_SIZE_KEYWORDS: Final = (
    "maxItems",
    "maxLength",
    "maxProperties",
    "minItems",
    "minLength",
    "minProperties",
)
_BOUND_KEYWORDS: Final = ("exclusiveMaximum", "exclusiveMinimum", "maximum", "minimum")
_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")
#: Every structural keyword a parameters schema may use.
SCHEMA_KEYWORDS: Final = frozenset(
    {
        "$defs",
        "$ref",
        "additionalProperties",
        "enum",
        "format",
        "items",
        "multipleOf",
        "properties",
        "required",
        "type",
        "uniqueItems",
        *_SIZE_KEYWORDS,
        *_BOUND_KEYWORDS,
        *_COMBINATORS,
    }
)
#: Library-chosen field words for keywords whose spelling is outside the field grammar.
_KEYWORD_FIELD: Final = {"$defs": "defs", "$ref": "ref"}

#: Refused keywords by category (lower case, ``-`` normalised to ``_``).
_KEYWORD_CODES: Final = {
    **dict.fromkeys(
        (
            "description",
            "title",
            "$comment",
            "summary",
            "comment",
            "help",
            "instructions",
            "prompt",
        ),
        "free_text",
    ),
    **dict.fromkeys(("default", "const", "example", "examples"), "clinical_value"),
    **dict.fromkeys(
        (
            "api_key",
            "apikey",
            "token",
            "secret",
            "password",
            "authorization",
            "auth",
            "credentials",
            "headers",
            "bearer",
            "private_key",
            "client_secret",
        ),
        "credential",
    ),
    **dict.fromkeys(
        (
            "url",
            "uri",
            "endpoint",
            "server",
            "servers",
            "host",
            "base_url",
            "baseurl",
            "href",
            "webhook",
        ),
        "endpoint",
    ),
    **dict.fromkeys(
        (
            "arguments",
            "args",
            "input",
            "inputs",
            "call",
            "calls",
            "kwargs",
            "parameters_values",
            "values",
        ),
        "arguments",
    ),
    **dict.fromkeys(
        (
            "path",
            "file",
            "filename",
            "file_path",
            "dir",
            "directory",
            "cwd",
            "working_directory",
            "root",
        ),
        "path",
    ),
}
#: When several keys of one mapping are refused, the first code of this order wins,
#: so the reported code does not depend on key order.
_REFUSAL_PRIORITY: Final = (
    "credential",
    "endpoint",
    "path",
    "arguments",
    "clinical_value",
    "free_text",
    "unknown_keyword",
)


def _field(path: _Path) -> str:
    """Render a field name, keeping the head and the tail of over-long paths."""
    joined = ".".join(path)
    if len(joined) <= _FIELD_LIMIT:
        return joined
    head = ".".join(path[:2])
    budget = _FIELD_LIMIT - len(head) - 3
    tail: list[str] = []
    for segment in reversed(path[2:]):
        if sum(len(item) + 1 for item in tail) + len(segment) > budget:
            break
        tail.insert(0, segment)
    return f"{head}...{'.'.join(tail)}"


def _fail(code: str, path: _Path) -> NoReturn:
    """Raise the refusal with a library-built field and no chained context."""
    raise ToolInventoryError(code, _field(path)) from None


def _is_name(value: object) -> bool:
    return type(value) is str and _NAME.fullmatch(value) is not None


def _keyword_code(key: object) -> str:
    """Classify one key that is not allowed where it occurs."""
    if type(key) is not str:
        return "unknown_keyword"
    return _KEYWORD_CODES.get(key.lower().replace("-", "_"), "unknown_keyword")


def _refuse_keys(keys: Sequence[object], path: _Path) -> None:
    """Refuse the given disallowed keys with the highest-priority code among them."""
    if keys:
        codes = {_keyword_code(key) for key in keys}
        _fail(next(code for code in _REFUSAL_PRIORITY if code in codes), path)


def _looks_like_credential(text: str) -> bool:
    if text.startswith(_SECRET_PREFIXES) or text.lower().startswith(_SECRET_PREFIXES_CI):
        return True
    if _HEXISH.fullmatch(text) is not None:
        return True
    return (
        _SECRETISH.fullmatch(text) is not None
        and any(char.isupper() for char in text)
        and any(char.islower() for char in text)
        and any(char.isdigit() for char in text)
    )


def _string_value_code(text: str) -> str | None:
    """Classify a string value: ``endpoint``, ``path`` or ``credential``, else ``None``."""
    if "://" in text or text.lower().startswith(("mailto:", "www.")):
        return "endpoint"
    if text.startswith(("/", "~", "./", "../")) or "\\" in text or _DRIVE.match(text) is not None:
        return "path"
    if _looks_like_credential(text):
        return "credential"
    return None


def _checked_size(value: object, path: _Path) -> int:
    if type(value) is not int or not 0 <= value <= MAX_INTEGER:
        _fail("invalid_schema", path)
    return value


def _checked_number(value: object, path: _Path) -> int | float:
    if type(value) is int and abs(value) <= MAX_INTEGER:
        return value
    if type(value) is float and math.isfinite(value):
        return value
    _fail("invalid_schema", path)


def _checked_divisor(value: object, path: _Path) -> int | float:
    number = _checked_number(value, path)
    if number <= 0:
        _fail("invalid_schema", path)
    return number


def _checked_bool(value: object, path: _Path) -> bool:
    if type(value) is not bool:
        _fail("invalid_schema", path)
    return value


def _checked_format(value: object, path: _Path) -> str:
    if type(value) is not str or value not in FORMATS:
        _fail("invalid_schema", path)
    return value


def _checked_type(value: object, path: _Path) -> str | tuple[str, ...]:
    if type(value) is str:
        if value not in TYPES:
            _fail("invalid_schema", path)
        return value
    if not isinstance(value, list | tuple) or not value:
        _fail("invalid_schema", path)
    seen: list[str] = []
    for index, member in enumerate(value):
        if type(member) is not str or member not in TYPES or member in seen:
            _fail("invalid_schema", (*path[:-1], f"{path[-1]}[{index}]"))
        seen.append(member)
    return tuple(seen)


def _checked_required(value: object, path: _Path) -> tuple[str, ...]:
    """Check the shape of ``required``; membership is checked by the schema."""
    if not isinstance(value, list | tuple):
        _fail("invalid_schema", path)
    seen: set[str] = set()
    for index, member in enumerate(value):
        where = (*path[:-1], f"{path[-1]}[{index}]")
        if not _is_name(member):
            _fail("invalid_name", where)
        if member in seen:
            _fail("invalid_schema", where)
        seen.add(member)
    return tuple(sorted(seen))


def _checked_enum(value: object, path: _Path) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple) or not value:
        _fail("invalid_schema", path)
    seen: set[tuple[str, object]] = set()
    for index, member in enumerate(value):
        where = (*path[:-1], f"{path[-1]}[{index}]")
        key: tuple[str, object]
        if member is None or type(member) is bool:
            key = ("literal", member)
        elif type(member) is int or type(member) is float:
            # 1 and 1.0 are the same JSON number, hence duplicates.
            key = ("number", _checked_number(member, where))
        elif type(member) is str:
            code = _string_value_code(member)
            if code is None and _TOKEN.fullmatch(member) is None:
                code = "clinical_value"
            if code is not None:
                _fail(code, where)
            key = ("string", member)
        else:
            _fail("invalid_schema", where)
        if key in seen:
            _fail("invalid_schema", where)
        seen.add(key)
    return tuple(value)


#: Keywords whose value is checked without recursion.
_VALUE_CHECKS: Final[dict[str, Callable[[object, _Path], object]]] = {
    "enum": _checked_enum,
    "format": _checked_format,
    "multipleOf": _checked_divisor,
    "required": _checked_required,
    "type": _checked_type,
    "uniqueItems": _checked_bool,
    **dict.fromkeys(_SIZE_KEYWORDS, _checked_size),
    **dict.fromkeys(_BOUND_KEYWORDS, _checked_number),
}


class _SchemaChecker:
    """Validate and normalise one tool's ``parameters`` schema."""

    __slots__ = ("_definitions",)

    def __init__(self) -> None:
        self._definitions: frozenset[str] = frozenset()

    def root(self, schema: object, path: _Path) -> Mapping[str, Any]:
        """Check a ``parameters`` schema (level 1, the only place ``$defs`` may occur)."""
        if isinstance(schema, Mapping):
            definitions = schema.get("$defs")
            if isinstance(definitions, Mapping):
                self._definitions = frozenset(key for key in definitions if _is_name(key))
        return self._schema(schema, path, 1)

    def _schema(self, schema: object, path: _Path, level: int) -> Mapping[str, Any]:
        if level > MAX_SCHEMA_DEPTH:
            _fail("too_deep", path)
        if not isinstance(schema, Mapping):
            _fail("invalid_schema", path)
        _refuse_keys([key for key in schema if key not in SCHEMA_KEYWORDS], path)
        if level > 1 and "$defs" in schema:
            _fail("invalid_schema", (*path, "defs"))
        result: dict[str, Any] = {}
        # Keywords are checked in code-point order, so which refusal is reported
        # first never depends on the order of keys in the input.
        for keyword in sorted(schema):
            word = _KEYWORD_FIELD.get(keyword, keyword)
            result[keyword] = self._keyword(keyword, schema[keyword], path, word, level)
        if "required" in schema:
            declared = result.get("properties", {})
            for index, member in enumerate(schema["required"]):
                if member not in declared:
                    _fail("invalid_schema", (*path, f"required[{index}]"))
        return types.MappingProxyType(result)

    def _keyword(self, keyword: str, value: object, path: _Path, word: str, level: int) -> object:
        check = _VALUE_CHECKS.get(keyword)
        if check is not None:
            return check(value, (*path, word))
        if keyword in ("properties", "$defs"):
            return self._named_schemas(value, path, word, level)
        if keyword == "$ref":
            return self._reference(value, (*path, word))
        if keyword in _COMBINATORS:
            return self._combinator(value, path, word, level)
        if keyword == "additionalProperties" and type(value) is bool:
            return value
        # ``items`` and a schema-valued ``additionalProperties``.
        return self._schema(value, (*path, word), level + 1)

    def _named_schemas(
        self, value: object, path: _Path, word: str, level: int
    ) -> Mapping[str, Mapping[str, Any]]:
        if not isinstance(value, Mapping):
            _fail("invalid_schema", (*path, word))
        for index, key in enumerate(value):
            if not _is_name(key):
                _fail("invalid_name", (*path, f"{word}[{index}]"))
        result = {
            key: self._schema(member, (*path, f"{word}[{index}]"), level + 1)
            for index, (key, member) in enumerate(value.items())
        }
        return types.MappingProxyType(dict(sorted(result.items())))

    def _combinator(
        self, value: object, path: _Path, word: str, level: int
    ) -> tuple[Mapping[str, Any], ...]:
        if not isinstance(value, list | tuple) or not value:
            _fail("invalid_schema", (*path, word))
        return tuple(
            self._schema(member, (*path, f"{word}[{index}]"), level + 1)
            for index, member in enumerate(value)
        )

    def _reference(self, value: object, path: _Path) -> str:
        if type(value) is not str:
            _fail("invalid_schema", path)
        match = _LOCAL_REF.fullmatch(value)
        if match is None:
            code = None if value.startswith("#") else _string_value_code(value)
            _fail(code or "invalid_schema", path)
        if match.group(1) not in self._definitions:
            _fail("invalid_schema", path)
        return value


def _checked_tool(entry: object, path: _Path) -> tuple[str, Mapping[str, Any]]:
    """Validate one tool entry and return its name and normalised parameters."""
    if not isinstance(entry, Mapping):
        _fail("invalid_tool", path)
    _refuse_keys([key for key in entry if key not in _TOOL_KEYS], path)
    if len(entry) != len(_TOOL_KEYS):
        _fail("invalid_tool", path)
    name = entry["name"]
    if not _is_name(name):
        _fail("invalid_name", (*path, "name"))
    return name, _SchemaChecker().root(entry["parameters"], (*path, "parameters"))


def _encode(document: object, path: _Path) -> str:
    try:
        return encode_openmed(document)
    except CanonicalError:
        _fail("invalid_document", path)


@dataclass(frozen=True, slots=True, eq=False)
class ToolEntry:
    """One tool: its name and its normalised, read-only parameters schema.

    Construction validates and normalises ``parameters`` (mappings become
    :class:`types.MappingProxyType` with sorted keys, arrays become tuples,
    ``required`` is sorted), so an entry breaking the inventory rules cannot
    exist; refusals then use the field prefix ``tool``. Equality and hashing
    follow the canonical JSON text, so ``1`` and ``1.0`` differ as they do in
    the digest.
    """

    name: str
    parameters: Mapping[str, Any]
    _json: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Validate and normalise the entry."""
        _, parameters = _checked_tool({"name": self.name, "parameters": self.parameters}, ("tool",))
        object.__setattr__(self, "parameters", parameters)
        object.__setattr__(self, "_json", _encode(self.to_dict(), ("tool",)))

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain ``{"name": ..., "parameters": {...}}`` document."""
        return {"name": self.name, "parameters": thaw_json(self.parameters)}

    def __eq__(self, other: object) -> bool:
        """Compare by canonical JSON text."""
        if not isinstance(other, ToolEntry):
            return NotImplemented
        return self._json == other._json

    def __hash__(self) -> int:
        """Hash the canonical JSON text."""
        return hash(self._json)


@dataclass(frozen=True, slots=True, eq=False)
class ToolInventory:
    """A canonical tool inventory: 1 to 1024 tools, sorted by name, names unique.

    Build one with :func:`build_tool_inventory` (any input order) or
    :meth:`from_dict` (canonical documents only). The constructor refuses a
    ``tools`` value that is not a tuple of :class:`ToolEntry` in strictly
    ascending name order. Equality and hashing follow the canonical JSON text.
    """

    tools: tuple[ToolEntry, ...]
    _json: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        """Refuse anything but a sorted, duplicate-free tuple of entries."""
        tools: object = self.tools
        if not isinstance(tools, tuple) or not all(type(tool) is ToolEntry for tool in tools):
            _fail("invalid_document", ("tools",))
        if not tools:
            _fail("empty_inventory", ("tools",))
        if len(tools) > MAX_TOOLS:
            _fail("too_many_tools", ("tools",))
        for index in range(1, len(tools)):
            if tools[index - 1].name == tools[index].name:
                _fail("duplicate_tool", (f"tools[{index}]", "name"))
            if tools[index - 1].name > tools[index].name:
                _fail("invalid_document", ("tools",))
        object.__setattr__(self, "_json", _encode(self.to_dict(), ("tools",)))

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document (plain dicts and lists)."""
        return {
            "schema_version": TOOL_INVENTORY_SCHEMA,
            "tools": [tool.to_dict() for tool in self.tools],
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return self._json

    @property
    def digest(self) -> str:
        """The ``sha256:<hex>`` openmed digest, i.e. the ``tool_inventory`` component."""
        return digest_openmed(self.to_dict())

    def __eq__(self, other: object) -> bool:
        """Compare by canonical JSON text."""
        if not isinstance(other, ToolInventory):
            return NotImplemented
        return self._json == other._json

    def __hash__(self) -> int:
        """Hash the canonical JSON text."""
        return hash(self._json)

    @classmethod
    def from_dict(cls, document: object) -> ToolInventory:
        """Strictly re-parse a :meth:`to_dict` document.

        The document must have exactly the keys ``schema_version`` (exactly
        :data:`TOOL_INVENTORY_SCHEMA`) and ``tools``, list its tools in
        code-point order of their names, and already be in normalised form
        (``required`` sorted); otherwise ``invalid_document``. Every tool is
        checked by the same rules as :func:`build_tool_inventory`.

        Raises:
            ToolInventoryError: on any refusal.
        """
        document = check_exact(
            document, "inventory", _DOCUMENT_KEYS, error=ToolInventoryError, code="invalid_document"
        )
        version = document["schema_version"]
        if type(version) is not str or version != TOOL_INVENTORY_SCHEMA:
            _fail("invalid_document", ("schema_version",))
        tools = document["tools"]
        if not isinstance(tools, list | tuple):
            _fail("invalid_document", ("tools",))
        inventory = build_tool_inventory(tools)
        if [entry["name"] for entry in tools] != [tool.name for tool in inventory.tools]:
            _fail("invalid_document", ("tools",))
        if _encode(document, ("inventory",)) != inventory.to_json():
            _fail("invalid_document", ("inventory",))
        return inventory

    @classmethod
    def from_json(cls, data: bytes | str) -> ToolInventory:
        """Strictly decode a canonical inventory document and re-parse it."""
        try:
            document = decode(data)
        except CanonicalError:
            _fail("invalid_document", ("inventory",))
        return cls.from_dict(document)


def build_tool_inventory(document: object) -> ToolInventory:
    """Build the canonical inventory from a list of tools or ``{"tools": [...]}``.

    Each tool is a mapping with exactly ``name`` and ``parameters``. Tools and
    keys may come in any order: the result is sorted by name and its canonical
    JSON is byte-identical for every ordering.

    Raises:
        ToolInventoryError: fail closed on the first refusal (see
            ``docs/tool-inventory.md`` for every code); the field names
            positions in the input as given, never submitted text.
    """
    tools: object = document
    if isinstance(document, Mapping):
        tools = check_exact(
            document, "inventory", ("tools",), error=ToolInventoryError, code="invalid_document"
        )["tools"]
        if not isinstance(tools, list | tuple):
            _fail("invalid_document", ("tools",))
    elif not isinstance(tools, list | tuple):
        _fail("invalid_document", ("inventory",))
    if not tools:
        _fail("empty_inventory", ("tools",))
    if len(tools) > MAX_TOOLS:
        _fail("too_many_tools", ("tools",))
    entries: dict[str, ToolEntry] = {}
    for index, entry in enumerate(tools):
        path = (f"tools[{index}]",)
        name, parameters = _checked_tool(entry, path)
        if name in entries:
            _fail("duplicate_tool", (*path, "name"))
        entries[name] = ToolEntry(name=name, parameters=parameters)
    return ToolInventory(tools=tuple(entries[name] for name in sorted(entries)))


def tool_inventory_digest(document: object) -> str:
    """Return the ``tool_inventory`` component digest of a tool list or document."""
    return build_tool_inventory(document).digest
