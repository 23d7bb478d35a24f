r"""Strict YAML restricted to JSON data, for configuration documents and authored requests.

:func:`load_strict_yaml` reads exactly one YAML document and returns plain JSON
data (``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``float``,
``bool``, ``None``), or refuses it with a closed
:class:`~sealeval.errors.YamlError` code. The rules (see
``docs/decisions/strict-yaml.md``) follow the invarlock convention for the
authored request:

* UTF-8 only, no byte-order mark, at most ``limits.max_bytes`` bytes (checked
  before anything is parsed);
* no anchors, aliases, explicit tags or directives (refused as the scanner
  produces the token);
* at most ``limits.max_nodes`` nodes (every scalar and every collection start)
  and ``limits.max_depth`` nested collections, counted on the event stream
  before any Python value is built;
* mapping keys are non-empty strings, never duplicated, never the merge key
  ``<<``;
* plain scalars are typed by YAML 1.1 resolution (PyYAML's ``SafeLoader``
  resolver) and each typed scalar must also be written in JSON syntax: only
  ``true``/``false``, ``null``, ``-?(0|[1-9][0-9]*)`` integers and finite
  ``-?(0|[1-9][0-9]*)\.[0-9]+([eE][+-]?[0-9]+)?`` floats. A plain scalar that
  YAML 1.1 reads as a timestamp stays the string it was written as;
* exactly one non-empty document.

Options refuse a top-level value that is not a mapping (``require_mapping``)
and mapping keys from a forbidden set, such as :data:`INCLUDE_KEYS`, outside
exempt subtrees (``forbidden_keys``, ``forbidden_keys_exempt``).

Errors never carry any part of the input and never chain a PyYAML exception.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from yaml.error import MarkedYAMLError, YAMLError
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner
from yaml.tokens import AliasToken, AnchorToken, DirectiveToken, TagToken

from sealeval.errors import YamlError


def _libyaml_parser() -> Callable[[str], Any] | None:
    """Return libyaml's event parser class, when PyYAML was built with it."""
    try:
        module = importlib.import_module("yaml._yaml")
    except ImportError:  # pragma: no cover - PyYAML without libyaml
        return None
    parser: Callable[[str], Any] | None = getattr(module, "CParser", None)
    return parser


_CParser: Final = _libyaml_parser()
#: Whether the libyaml C parser is used (same checks, same codes; much faster).
LIBYAML_AVAILABLE: Final = _CParser is not None

__all__ = [
    "DEFAULT_YAML_LIMITS",
    "INCLUDE_KEYS",
    "LIBYAML_AVAILABLE",
    "LIBYAML_RECHECK_BYTES",
    "YamlLimits",
    "load_strict_yaml",
]

#: Keys that would make a document pull in another one; refused by request loaders.
INCLUDE_KEYS: Final = frozenset(
    {"include", "includes", "include_file", "include_files", "extends", "ref"}
)

_BOM: Final = b"\xef\xbb\xbf"
# Python refuses to convert longer digit strings (CPython's default limit); the
# length is checked explicitly so the outcome never depends on interpreter settings.
_MAX_INTEGER_DIGITS: Final = 4300

_JSON_INTEGER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")
_JSON_FLOAT: Final = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_DIRECTIVE_LINE: Final = re.compile(r"^%", re.MULTILINE)
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
# What the two parsers read differently (tabs in some positions; NEL, LS, PS
# as line breaks; an inner BOM; a block scalar header running into a comment):
# such documents take the pure parser.
_LIBYAML_DIVERGES: Final = re.compile("[\t\x85\u2028\u2029\ufeff]|[|>][-+0-9]*#")
#: Malformed documents up to this size are re-parsed by the pure parser for its exact code.
LIBYAML_RECHECK_BYTES: Final = 1_048_576
_SURROGATE_PAIR: Final = re.compile("([\ud800-\udbff])([\udc00-\udfff])")

_TAG_STR: Final = "tag:yaml.org,2002:str"
_TAG_BOOL: Final = "tag:yaml.org,2002:bool"
_TAG_NULL: Final = "tag:yaml.org,2002:null"
_TAG_INT: Final = "tag:yaml.org,2002:int"
_TAG_FLOAT: Final = "tag:yaml.org,2002:float"
_TAG_MERGE: Final = "tag:yaml.org,2002:merge"
# Resolved tags whose scalar is kept as the text it was written as: a timestamp
# (``2024-01-01``) because a value must be JSON data, and YAML 1.1's "value"
# indicator ``=`` because it has no meaning in JSON data (the SafeLoader cannot
# construct it at all).
_STRING_TAGS: Final = frozenset(
    {_TAG_STR, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}
)

# ``resolve`` reads only class-level tables, so one shared instance is safe.
_RESOLVER: Final = Resolver()


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """Limits enforced by :func:`load_strict_yaml`.

    Attributes:
        max_bytes: largest accepted document, in UTF-8 bytes.
        max_nodes: most nodes accepted; every scalar (keys included) and every
            mapping or sequence start counts as one.
        max_depth: deepest accepted nesting of mappings and sequences (a
            scalar document has depth 0, ``[0]`` and ``{a: 0}`` have depth 1).
    """

    max_bytes: int = 1_048_576
    max_nodes: int = 10_000
    max_depth: int = 64

    def __post_init__(self) -> None:
        """Refuse limits that are not positive integers."""
        for name in ("max_bytes", "max_nodes", "max_depth"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError("YamlLimits: every limit must be a positive int")


DEFAULT_YAML_LIMITS: Final = YamlLimits()


def _refuse(code: str) -> NoReturn:
    """Raise the error for ``code`` with no cause and a suppressed context."""
    raise YamlError(code) from None


# ---------------------------------------------------------------------------
# Bytes


def _decode(data: bytes | bytearray | memoryview | str, max_bytes: int) -> str:
    """Apply the size, UTF-8 and byte-order-mark rules; return the text."""
    if isinstance(data, str):
        if len(data) > max_bytes:  # every code point takes at least one byte
            _refuse("too_large")
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            raw = None
        if raw is None:
            _refuse("not_utf8")
    elif isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
    else:
        raise TypeError("load_strict_yaml: data must be bytes or str")
    if len(raw) > max_bytes:
        _refuse("too_large")
    if raw.startswith(_BOM):
        _refuse("byte_order_mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:
        _refuse("not_utf8")
    return text


# ---------------------------------------------------------------------------
# Event stream


class _EventSource(Reader, Scanner, Parser):
    """PyYAML's pure-Python reader, scanner and parser, refusing four token kinds.

    The parser takes every token through :meth:`get_token`, so checking there
    refuses anchors, aliases, tags and directives (including the reserved
    directives the parser would silently ignore) before any event is built.
    """

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)

    def get_token(self) -> Any:
        """Return the next token, refusing anchors, aliases, tags and directives."""
        token = Scanner.get_token(self)  # type: ignore[no-untyped-call]
        if isinstance(token, AnchorToken | AliasToken):
            _refuse("anchor_or_alias")
        if isinstance(token, TagToken | DirectiveToken):
            _refuse("tag_or_directive")
        return token


def _c_events(text: str) -> Iterator[Event]:
    """Yield libyaml's events, refusing what the pure scanner refuses as tokens.

    libyaml reports anchors, aliases, tags and ``%YAML``/``%TAG`` directives
    on the events rather than as tokens; each is refused here with the same
    code. (Reserved directives never reach this path: see :func:`_read_events`.)
    """
    assert _CParser is not None  # only called when LIBYAML_AVAILABLE
    parser = _CParser(text)
    try:
        while True:
            event: Event = parser.get_event()
            if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
                _refuse("anchor_or_alias")
            if getattr(event, "tag", None) is not None:
                _refuse("tag_or_directive")
            if isinstance(event, DocumentStartEvent) and (event.version or event.tags):
                _refuse("tag_or_directive")
            yield event
            if isinstance(event, StreamEndEvent):
                return
    finally:
        parser.dispose()


def _python_events(text: str) -> Iterator[Event]:
    """Yield the pure-Python parser's events (tokens refused as they are scanned)."""
    source = _EventSource(text)
    while True:
        event: Event = source.get_event()  # type: ignore[no-untyped-call]
        yield event
        if isinstance(event, StreamEndEvent):
            return


def _scan_events(
    stream: Iterator[Event], limits: YamlLimits
) -> list[NodeEvent | CollectionEndEvent]:
    """Collect the node events of ``stream``, enforcing every stream-level rule.

    Nothing is constructed here: the returned events are built into values
    only once the whole stream has passed the syntax, token, document, node
    and depth checks, so an over-limit document is refused after reading at
    most ``limits.max_nodes`` nodes.
    """
    events: list[NodeEvent | CollectionEndEvent] = []
    documents = 0
    nodes = 0
    depth = 0
    for event in stream:
        if isinstance(event, StreamEndEvent):
            return events
        if isinstance(event, DocumentStartEvent):
            documents += 1
            if documents > 1:
                _refuse("multiple_documents")
        elif isinstance(event, ScalarEvent | CollectionStartEvent):
            nodes += 1
            if nodes > limits.max_nodes:
                _refuse("too_many_nodes")
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > limits.max_depth:
                    _refuse("too_deep")
            events.append(event)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
            events.append(event)
        elif isinstance(event, NodeEvent):  # an alias event; its token is refused first
            _refuse("anchor_or_alias")
        # StreamStartEvent and DocumentEndEvent carry nothing to check.
    return events  # pragma: no cover - every stream ends with StreamEndEvent


def _read_events(
    text: str, limits: YamlLimits, *, use_libyaml: bool | None = None
) -> list[NodeEvent | CollectionEndEvent]:
    r"""Run :func:`_scan_events`, turning any PyYAML failure into ``invalid_yaml``.

    The libyaml C parser is used when installed (``use_libyaml=None``), about
    20 times faster on large documents, with the same checks and codes. The
    pure-Python parser is used otherwise, and always for what libyaml treats
    differently: a line starting with ``%`` (libyaml silently skips reserved
    directives), a ``\uD800``-style surrogate escape (libyaml refuses all of
    them, joined pairs included), a tab, NEL, LS, PS or inner byte-order mark
    (read differently by the two), and a document libyaml refuses as malformed
    that is at most :data:`LIBYAML_RECHECK_BYTES` long (so that the code is
    the pure parser's, e.g. ``too_deep`` where libyaml stops at its own
    nesting limit). A larger malformed document is ``invalid_yaml`` at once.
    """
    if use_libyaml is None:
        use_libyaml = LIBYAML_AVAILABLE
    if use_libyaml and (
        _DIRECTIVE_LINE.search(text) is not None
        or _SURROGATE_ESCAPE.search(text) is not None
        or _LIBYAML_DIVERGES.search(text) is not None
    ):
        use_libyaml = False
    if use_libyaml:
        try:
            return _scan_events(_c_events(text), limits)
        except YamlError:
            raise
        except (YAMLError, ValueError, OverflowError):
            if len(text) > LIBYAML_RECHECK_BYTES:
                _refuse("invalid_yaml")
    try:
        return _scan_events(_python_events(text), limits)
    except YamlError:
        raise
    except MarkedYAMLError as error:
        # A malformed tag, directive, anchor or alias is still one of the refused
        # token kinds: libyaml reads some of them (``!~!``) as a tag, so the code
        # names the kind whatever the parser (tests/test_strict_yaml.py fuzzes both).
        code = _SCANNING_CODES.get(error.context or "", "invalid_yaml")
    except (YAMLError, ValueError, OverflowError):
        # ValueError/OverflowError: a \U escape beyond U+10FFFF.
        code = "invalid_yaml"
    _refuse(code)


#: The pure scanner's context for a malformed token of a refused kind -> its code.
_SCANNING_CODES: Final = {
    "while scanning a tag": "tag_or_directive",
    "while parsing a tag": "tag_or_directive",
    "while scanning a directive": "tag_or_directive",
    "while scanning an anchor": "anchor_or_alias",
    "while scanning an alias": "anchor_or_alias",
}


# ---------------------------------------------------------------------------
# Construction


def _quoted_text(event: ScalarEvent) -> str:
    r"""Return a string scalar's text, joining surrogate pairs written as escapes.

    Surrogates can only come from ``\uD800``-``\uDFFF`` escapes in a
    double-quoted scalar (the input is valid UTF-8). A pair becomes the code
    point it encodes, as in JSON; a lone surrogate can never be encoded as
    UTF-8 and is refused.
    """
    text = event.value
    if event.style == '"' and _SURROGATE.search(text) is not None:
        text = _SURROGATE_PAIR.sub(
            lambda pair: chr(0x10000 + ((ord(pair[1]) - 0xD800) << 10) + (ord(pair[2]) - 0xDC00)),
            text,
        )
        if _SURROGATE.search(text) is not None:
            _refuse("unpaired_surrogate")
    return text


def _key(event: NodeEvent) -> str:
    """Return a mapping key, which must be a non-empty string scalar."""
    if not isinstance(event, ScalarEvent):
        _refuse("invalid_key")
    tag = _RESOLVER.resolve(ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
    if tag == _TAG_MERGE:
        _refuse("merge_key")
    if tag not in _STRING_TAGS:
        _refuse("invalid_key")
    key = _quoted_text(event)
    if not key:
        _refuse("invalid_key")
    return key


def _integer(text: str) -> int:
    """Return a JSON-syntax integer scalar."""
    if _JSON_INTEGER.fullmatch(text) is None:
        _refuse("invalid_integer")
    if len(text) - text.startswith("-") > _MAX_INTEGER_DIGITS:
        _refuse("integer_too_long")
    try:
        return int(text)
    except ValueError:  # a lower interpreter-wide digit limit
        pass
    _refuse("integer_too_long")


def _float(text: str) -> float:
    """Return a JSON-syntax, finite float scalar."""
    if _JSON_FLOAT.fullmatch(text) is None:
        _refuse("invalid_float")
    value = float(text)
    if not math.isfinite(value):  # overflow, such as 1.0e+400
        _refuse("invalid_float")
    return value


def _scalar(event: ScalarEvent) -> Any:
    """Return the JSON value of a scalar that is not a mapping key."""
    tag = _RESOLVER.resolve(ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
    text = event.value
    if tag in _STRING_TAGS:
        return _quoted_text(event)
    if tag == _TAG_BOOL:
        if text in ("true", "false"):
            return text == "true"
        _refuse("invalid_boolean")
    if tag == _TAG_NULL:
        if text == "null":
            return None
        _refuse("invalid_null")
    if tag == _TAG_INT:
        return _integer(text)
    if tag == _TAG_FLOAT:
        return _float(text)
    if tag == _TAG_MERGE:  # a plain ``<<`` written as a value
        _refuse("merge_key")
    _refuse("invalid_yaml")  # no other tag is resolved implicitly


def _build(events: list[NodeEvent | CollectionEndEvent]) -> Any:
    """Build the value of a checked event stream, iteratively."""
    if not events:
        _refuse("empty_document")
    first = events[0]
    if isinstance(first, ScalarEvent) and first.implicit[0] and not first.value:
        # ``---`` with no content (or only comments) is an empty document,
        # not an implicit null.
        _refuse("empty_document")
    root: Any = None
    containers: list[dict[str, Any] | list[Any]] = []
    # Per open container: the key awaiting its value (``None`` for sequences
    # and for mappings that expect a key next).
    pending: list[str | None] = []
    for event in events:
        if isinstance(event, CollectionEndEvent):
            containers.pop()
            pending.pop()
            continue
        top = containers[-1] if containers else None
        if isinstance(top, dict) and pending[-1] is None:
            key = _key(event)
            if key in top:
                _refuse("duplicate_key")
            pending[-1] = key
            continue
        value: Any
        if isinstance(event, ScalarEvent):
            value = _scalar(event)
        else:
            value = {} if isinstance(event, MappingStartEvent) else []
        if top is None:
            root = value
        elif isinstance(top, list):
            top.append(value)
        else:
            awaiting = pending[-1]
            assert awaiting is not None  # a mapping expecting a key was handled above
            top[awaiting] = value
            pending[-1] = None
        if not isinstance(event, ScalarEvent):
            containers.append(value)
            pending.append(None)
    return root


# ---------------------------------------------------------------------------
# Forbidden keys


def _check_forbidden_keys(
    value: Any,
    forbidden: frozenset[str],
    exempt: Callable[[tuple[str, ...]], bool] | None,
) -> None:
    """Refuse forbidden mapping keys at any depth outside exempt subtrees.

    A mapping reached from the top through mapping keys only has a path (the
    tuple of those keys); when ``exempt(path)`` is true, that mapping and its
    whole subtree are skipped. A mapping reached through a sequence has no
    path of keys and is never exempt by itself.
    """
    stack: list[tuple[Any, tuple[str, ...] | None]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            if path is not None and exempt is not None and exempt(path):
                continue
            for key, child in item.items():
                if key.lower() in forbidden:
                    _refuse("include_key")
                stack.append((child, None if path is None else (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, None) for child in item)


# ---------------------------------------------------------------------------
# Public entry point


def load_strict_yaml(
    data: bytes | bytearray | memoryview | str,
    *,
    limits: YamlLimits = DEFAULT_YAML_LIMITS,
    require_mapping: bool = False,
    forbidden_keys: frozenset[str] = frozenset(),
    forbidden_keys_exempt: Callable[[tuple[str, ...]], bool] | None = None,
    use_libyaml: bool | None = None,
) -> Any:
    """Load one strict YAML document as plain JSON data.

    Checks run in this order, so the first failing group decides the code:
    size, byte-order mark and UTF-8; then the token and event stream in
    document order (syntax, anchors and aliases, tags and directives, node
    count, depth, a second document); then construction in document order
    (keys, duplicates, scalar syntax); then ``require_mapping``; then the
    forbidden keys.

    Args:
        data: the document as UTF-8 bytes, or as text (encoded to UTF-8 first).
        limits: byte size, node count and nesting depth limits.
        require_mapping: refuse a top-level value that is not a mapping.
        forbidden_keys: mapping keys refused at any depth, compared with the
            lower-cased key text (for instance :data:`INCLUDE_KEYS`).
        forbidden_keys_exempt: called with the path of keys leading to a
            mapping; when it returns true the mapping and everything inside
            it are exempt from ``forbidden_keys``.
        use_libyaml: parse with libyaml's C parser (``True``), PyYAML's pure
            parser (``False``) or the C parser when installed (``None``, the
            default). Both give the same values and the same codes.

    Returns:
        A ``dict`` (``str`` keys), ``list``, ``str``, ``int``, ``float``,
        ``bool`` or ``None``; integers and floats keep their kind.

    Raises:
        YamlError: with a closed code; never quotes the input and never
            chains a PyYAML exception.
        TypeError: when ``data`` is neither bytes nor str.
    """
    text = _decode(data, limits.max_bytes)
    value = _build(_read_events(text, limits, use_libyaml=use_libyaml))
    if require_mapping and not isinstance(value, dict):
        _refuse("not_mapping")
    if forbidden_keys:
        forbidden = frozenset(key.lower() for key in forbidden_keys)
        _check_forbidden_keys(value, forbidden, forbidden_keys_exempt)
    return value
