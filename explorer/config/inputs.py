"""The one input boundary: every text that becomes (part of) a scenario is parsed here.

A scenario file, an upload, a CLI ``--set`` value and a share-link parameter value all go through
:func:`parse_document` or :func:`parse_value`, which run PyYAML's safe loader with bounds a
hostile text cannot get around:

- total size (:data:`MAX_BYTES`), nesting depth (:data:`MAX_DEPTH`, checked while composing, so
  1 KB of ``[[[[`` fails at level 33 instead of exhausting the recursion limit), length of one
  string (:data:`MAX_SCALAR_CHARS`) and of one number (:data:`MAX_NUMBER_CHARS`: Python refuses
  to read integers of more than 4,300 digits);
- the *cost* of parsing, not only the size: PyYAML's pure-Python parser spends ~20 us per value
  (a 198 KB list of 99,000 numbers took 2-7 s of CPU), so the loader counts what it does and stops
  at the first step over a bound: scanner tokens (:data:`MAX_TOKENS`), values (:data:`MAX_NODES`)
  and items of one list or mapping (:data:`MAX_ITEMS`), each checked as it is read, before the
  Python objects of the document are built (tests/test_input_cost.py times the worst cases);
- no anchors or aliases (``&a`` / ``*a``): a scenario never needs them and they are how an
  855-byte "billion laughs" document expands to gigabytes;
- no explicit tags (``!!int abc``, ``!!timestamp x``, ``!!python/...``): their constructors raise
  arbitrary exceptions on bad input, and plain YAML already gives every type a scenario uses;
- no merge keys (``<<``) and no duplicate keys (last-one-wins would hide a typo or an attack);
- numbers are YAML 1.2's (explorer/config/yaml_core.py): ``1:30`` is a string, not the base-60
  90; ``030`` is 30, not the octal 24; ``1e6`` and ``5e-324`` are numbers, not strings;
- text must be encodable as UTF-8: a lone surrogate (``"\\ud800"``, or undecodable bytes in a
  command-line argument) is rejected naming the field; an escaped surrogate pair, as JSON writes
  a character beyond U+FFFF, is joined into that character;
- plain ``2024-01-01`` stays a string (the implicit timestamp resolver is off: ``2024-99-99``
  would otherwise raise ValueError from ``datetime``).

Every failure is a :class:`~explorer.config.schema.ScenarioError` with a one-line message that names the
source (file or key), the dotted key inside the document when known, and the line.
"""
from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from .schema import NOT_UTF8, ScenarioError, excerpt, utf8_text
from .yaml_core import FLOAT_TAG as _FLOAT_TAG
from .yaml_core import INT_TAG as _INT_TAG
from .yaml_core import core_int, core_resolvers

MAX_BYTES = 262_144            # a scenario file is ~2 KB; its description (20,000 chars) <= 80 KB
MAX_VALUE_BYTES = 100_000      # one --set value (a share-link value is capped lower, in share.py)
MAX_DEPTH = 32                 # a scenario nests 4 deep (cluster.scale_up.latency_us; gpu mapping)
# The shipped scenarios and presets hold at most ~330 values; the longest list a real scenario
# needs is stage_layers, one entry per pipeline chunk (pp*vpp: 64 stages x 64 chunks = 4,096).
MAX_ITEMS = 4_096              # items of one list or mapping
MAX_NODES = 10_000             # values in one document (scalars, lists and mappings)
MAX_TOKENS = 40_000            # scanner tokens (a value is 1-4 tokens; ``...`` lines are tokens too)
MAX_SCALAR_CHARS = 20_000      # = the description's max_len; names and values are far shorter
MAX_NUMBER_CHARS = 1_000       # digits of one plain number; physical bounds reject far fewer

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Rejected(Exception):
    """Raised inside the loader; turned into a ScenarioError with the source's name."""

    def __init__(self, message: str, mark: Any, path: str = "") -> None:
        super().__init__(message)
        self.message, self.mark, self.path = message, mark, path


def _tag_name(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader with the bounds of the module docstring.  The checks sit in the composer, which
    sees every node once, before any value is constructed or any alias could be expanded."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._tokens = 0
        self._path: list[str] = []

    def fetch_more_tokens(self) -> None:
        """The scanner's step (one token, after skipping blanks and comments): counted, so no
        document costs more than MAX_TOKENS of them, whatever it holds."""
        self._tokens += 1
        if self._tokens > MAX_TOKENS:
            raise _Rejected(f"more than {MAX_TOKENS:,} YAML tokens in one document; a scenario has "
                            "a few hundred", self.get_mark())
        super().fetch_more_tokens()

    def _where(self) -> str:
        return ".".join(self._path).replace(".[", "[")

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or event.anchor is not None:
            raise _Rejected("YAML anchors and aliases (&name, *name) are not accepted; write the value out",
                            event.start_mark, self._where())
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise _Rejected(f"explicit YAML tag {excerpt(_tag_name(tag))} is not accepted; "
                            "write a plain value",
                            event.start_mark, self._where())
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Rejected(f"more than {MAX_NODES:,} values in one document", event.start_mark)
        if isinstance(event, ScalarEvent):
            if len(event.value) > MAX_SCALAR_CHARS:
                raise _Rejected(f"a value of {len(event.value):,} characters is longer than the "
                                f"{MAX_SCALAR_CHARS:,} accepted", event.start_mark, self._where())
            text = utf8_text(event.value)
            if text is None:
                raise _Rejected(f"{excerpt(event.value)} {NOT_UTF8}", event.start_mark, self._where())
            event.value = text         # a JSON-style escaped surrogate pair, joined
            return super().compose_node(parent, index)
        if isinstance(event, (SequenceStartEvent, MappingStartEvent)):
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Rejected(f"nesting deeper than {MAX_DEPTH} levels", event.start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)

    def compose_scalar_node(self, anchor: Any) -> ScalarNode:
        node = super().compose_scalar_node(anchor)
        if node.tag in (_INT_TAG, _FLOAT_TAG) and len(node.value) > MAX_NUMBER_CHARS:
            raise _Rejected(f"a number of {len(node.value):,} characters is beyond any physical quantity",
                            node.start_mark, self._where())
        return node

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        start = self.get_event()
        node = SequenceNode(self.resolve(SequenceNode, None, start.implicit), [], start.start_mark, None,
                            flow_style=start.flow_style)
        index = 0
        while not self.check_event(yaml.SequenceEndEvent):
            if index == MAX_ITEMS:
                raise _Rejected(f"a list of more than {MAX_ITEMS:,} items; no field takes one that "
                                "long (stage_layers, the longest, has pp*vpp)", start.start_mark,
                                self._where())
            self._path.append(f"[{index}]")
            node.value.append(self.compose_node(node, index))
            self._path.pop()
            index += 1
        node.end_mark = self.get_event().end_mark
        return node

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        start = self.get_event()
        node = MappingNode(self.resolve(MappingNode, None, start.implicit), [], start.start_mark, None,
                           flow_style=start.flow_style)
        seen: set[str] = set()
        while not self.check_event(yaml.MappingEndEvent):
            if len(node.value) == MAX_ITEMS:
                raise _Rejected(f"a mapping of more than {MAX_ITEMS:,} keys", start.start_mark, self._where())
            key = self.compose_node(node, None)
            if key.tag == _MERGE_TAG:
                raise _Rejected("YAML merge keys (<<) are not accepted; write the keys out",
                                key.start_mark, self._where())
            text = key.value if isinstance(key, ScalarNode) else "?"
            if isinstance(key, ScalarNode):
                if text in seen:
                    where = ".".join(self._path + [text]).replace(".[", "[")
                    raise _Rejected(f"duplicate key {excerpt(where)}; each key may appear once",
                                    key.start_mark)
                seen.add(text)
            self._path.append(text)
            value = self.compose_node(node, key)
            self._path.pop()
            node.value.append((key, value))
        node.end_mark = self.get_event().end_mark
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        """As SafeConstructor's, but keys equal after construction (``1`` and ``0x1``) are
        duplicates too, not a silent overwrite."""
        if not isinstance(node, MappingNode):
            return super().construct_mapping(node, deep)
        out: dict = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise _Rejected("a key must be a plain value, not a list or mapping",
                                key_node.start_mark) from None
            if key in out:
                raise _Rejected(f"duplicate key {excerpt(key)}; each key may appear once",
                                key_node.start_mark)
            out[key] = self.construct_object(value_node, deep=deep)
        return out


# A date-like plain scalar stays a string: no scenario field is a date, and the timestamp
# constructor raises ValueError on "2024-99-99".  Numbers are YAML 1.2's (yaml_core.py): no
# base-60 1:30, no octal 030; exponent floats without a dot (1e6, 5e-324) are floats, as in JSON
# (YAML 1.1 read them as strings, so "1e-05" written into a link came back as text).
BoundedLoader.yaml_implicit_resolvers = core_resolvers({
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()})
def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """An int scalar read by YAML 1.2's rules (yaml_core.core_int)."""
    return core_int(loader.construct_scalar(node))


BoundedLoader.add_constructor(_INT_TAG, _construct_int)


def _load(text: Any, source: str, max_bytes: int, prefix: str) -> Any:
    """Parse one YAML document under the bounds; every failure is a one-line ScenarioError."""
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise ScenarioError(source, f"is {len(text):,} bytes; at most {max_bytes:,} are accepted")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ScenarioError(source, "is not UTF-8 text") from None
    if not isinstance(text, str):
        raise ScenarioError(source, f"{excerpt(text)} is not text")
    if utf8_text(text) != text:
        # Undecodable bytes of a command-line argument arrive as lone surrogates (PEP 383).
        raise ScenarioError(source, f"{excerpt(text)} is not UTF-8 text (it holds a lone surrogate, "
                            "such as \\udcff for a byte that is not UTF-8)")
    # Characters <= bytes: the cheap test first, the exact one only near the limit.
    if len(text) > max_bytes or (4 * len(text) > max_bytes
                                 and len(text.encode("utf-8", "replace")) > max_bytes):
        raise ScenarioError(source, f"is {len(text.encode('utf-8', 'replace')):,} bytes; "
                            f"at most {max_bytes:,} are accepted")
    loader = None
    try:
        loader = BoundedLoader(text)       # the reader rejects control characters here already
        return loader.get_single_data()
    except _Rejected as exc:
        where = ".".join(p for p in (prefix, exc.path) if p).replace(".[", "[")
        line = f" (line {exc.mark.line + 1})" if exc.mark is not None else ""
        prefix = f"{where}: " if where and where != source else ""
        raise ScenarioError(source, prefix + exc.message + line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(source, f"is not valid YAML/JSON{where}") from None
    except (ValueError, TypeError, OverflowError, RecursionError, AttributeError, KeyError,
            IndexError) as exc:
        # Defence in depth: the bounds above leave no known constructor path that raises these.
        raise ScenarioError(source, f"cannot be read ({exc.__class__.__name__})") from None
    finally:
        if loader is not None:
            loader.dispose()


def parse_document(text: str | bytes, source: str = "scenario", max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """A whole scenario (file or upload) as a raw mapping; raises a one-line ScenarioError.

    >>> parse_document("parallelism: {pp: 4}")
    {'parallelism': {'pp': 4}}
    >>> parse_document("a: &x [1]\\nb: *x")
    Traceback (most recent call last):
    ...
    explorer.config.schema.ScenarioError: scenario: a: YAML anchors and aliases ... (line 1)
    """
    raw = _load(text, source, max_bytes, "")
    if not isinstance(raw, dict):
        raise ScenarioError(source, "must hold a mapping of sections (model, training, ...)")
    return raw


def parse_value(text: str, key: str, max_bytes: int = MAX_VALUE_BYTES) -> Any:
    """One override value (``--set key=VALUE``, a link's ``key=VALUE``) as YAML; empty is None.

    >>> parse_value("[7, 9]", "parallelism.stage_layers")
    [7, 9]
    >>> parse_value("!!int abc", "parallelism.pp")
    Traceback (most recent call last):
    ...
    explorer.config.schema.ScenarioError: parallelism.pp: explicit YAML tag '!!int' is not accepted; ...
    """
    if isinstance(text, str) and not text.strip():
        return None
    try:
        return _load(text, key, max_bytes, key)
    except ScenarioError as exc:
        if "is not valid YAML/JSON" in str(exc):
            raise ScenarioError(key, f"{excerpt(text)} is not a valid YAML value") from None
        raise
