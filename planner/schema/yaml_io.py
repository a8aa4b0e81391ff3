"""Safe YAML loading that remembers where every key stands, so errors can name file, line and column.

Loading is defensive: plain data only (no tags such as `!!python/object`), bounded file size,
nesting, number of values, aliases (billion laughs) and text length, and a key given twice in one
mapping is an error naming both lines (PyYAML would silently keep the last). Also turns pydantic
validation errors into one-line messages with the location, what was expected and a hint.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from yaml.constructor import ConstructorError

from planner.errors import InputError, did_you_mean
from planner.schema import data_cache
from planner.schema.files import read_text

MAX_FILE_BYTES = 4 * 2**20
MAX_DEPTH = 32  # mappings and lists inside each other
MAX_ALIASES = 100  # `*name` references in one document
MAX_NODES = 100_000  # values in one document, counted again through every alias (catalog: ~5,000)
MAX_SCALAR_CHARS = 20_000  # one key or value
MAX_ERRORS = 20  # validation errors listed before "... and N more"

_YAML = "tag:yaml.org,2002:"
# Plain data: what JSON has, plus YAML's dates (rejected later by the schema) and merge keys.
SAFE_TAGS = frozenset(
    _YAML + t for t in ("null", "bool", "int", "float", "str", "seq", "map", "timestamp", "merge")
)
# YAML 1.1 reads `010` as octal 8 and `1:30` as 90 (base 60): a surprise in a problem file.
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")

Loc = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Located:
    """A parsed YAML document plus the (line, column) of every key path, 1-based."""

    data: Any
    positions: dict[Loc, tuple[int, int]]
    source: str

    def where(self, loc: Loc) -> str:
        """`file:line:col` for the deepest known prefix of `loc`."""
        for cut in range(len(loc), -1, -1):
            pos = self.positions.get(tuple(loc[:cut]))
            if pos:
                return f"{self.source}:{pos[0]}:{pos[1]}"
        return self.source


def _at(source: str, mark: Any) -> str:
    return f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _tag_name(tag: str) -> str:
    return "!!" + tag.removeprefix(_YAML) if tag.startswith(_YAML) else tag


class _Walker:
    """Records the position of every key path and checks what the composer cannot: duplicate
    keys, tags, text length, surprising YAML 1.1 numbers, and the size once aliases expand."""

    def __init__(self, source: str, alias_at: dict[tuple[int, int], Any] | None = None) -> None:
        self.source = source
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.visited = 0
        self.alias_at = alias_at or {}  # (parent node, index or key node) -> the alias's mark

    def fail(self, node: yaml.Node, message: str) -> NoReturn:
        raise InputError(f"{_at(self.source, node.start_mark)}: {message}")

    def walk(self, node: yaml.Node, loc: Loc, depth: int, at: Any = None) -> None:
        """Record and check `node` at `loc`; `at` is the mark of the alias that repeats it, so
        a message about a repeated value points at the repetition, not at its anchor."""
        self.visited += 1
        if self.visited > MAX_NODES:
            self.fail(node, f"more than {MAX_NODES:,} values once YAML aliases are expanded")
        if depth > MAX_DEPTH:
            self.fail(node, f"nesting deeper than {MAX_DEPTH} levels at {_short(dotted(loc), 60)}")
        mark = at or node.start_mark
        self.positions.setdefault(loc, (mark.line + 1, mark.column + 1))
        if node.tag not in SAFE_TAGS:
            self.fail(
                node,
                f"{dotted(loc)}: the YAML tag `{_tag_name(node.tag)}` is not allowed: a problem "
                "file holds plain values (text, numbers, true/false, lists and mappings)",
            )
        if isinstance(node, yaml.ScalarNode):
            self._scalar(node, loc)
        elif isinstance(node, yaml.MappingNode):
            self._mapping(node, loc, depth, at)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.walk(item, (*loc, i), depth + 1, at or self.alias_at.get((id(node), i)))

    def _scalar(self, node: yaml.ScalarNode, loc: Loc) -> None:
        text = node.value
        if len(text) > MAX_SCALAR_CHARS:
            self.fail(
                node,
                f"{dotted(loc)}: a value of {len(text):,} characters; the limit is "
                f"{MAX_SCALAR_CHARS:,}",
            )
        if node.style is None and node.tag in (_YAML + "int", _YAML + "float"):
            if _OCTAL.fullmatch(text):
                self.fail(
                    node,
                    f"{dotted(loc)}: YAML reads `{text}` as an octal number "
                    f"({int(text.replace('_', ''), 8)}); write it without the leading zero",
                )
            if _SEXAGESIMAL.fullmatch(text):
                self.fail(
                    node,
                    f"{dotted(loc)}: YAML reads `{text}` as a base-60 number; quote it or write "
                    "the number with its unit (e.g. `90 s`)",
                )

    def _mapping(self, node: yaml.MappingNode, loc: Loc, depth: int, at: Any = None) -> None:
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                self.fail(key, f"{dotted(loc)}: a key must be plain text, not a list or mapping")
            k = key.value
            if key.tag == _YAML + "null":
                self.fail(
                    key, f"{dotted(loc)}: a key is empty (`{k or '~'}` is null); keys are text"
                )
            if key.tag == _YAML + "bool":  # placed here: the data's key True reads as `[1]`
                self.fail(
                    key,
                    f"{dotted((*loc, k))}: keys must be text, got `{_short(k)}`, which YAML reads "
                    "as a boolean (unquoted yes/no/on/off/true/false are booleans): quote it, as "
                    f'in "{_short(k)}"',
                )
            line = key.start_mark.line + 1
            if key.tag != _YAML + "merge":  # `<<: *defaults` then a key overrides on purpose
                if (key.tag, k) in seen:
                    inside = f"in {dotted(loc)}" if loc else "at the top level"
                    self.fail(
                        key,
                        f"duplicate key `{_short(k)}` {inside}: first on line "
                        f"{seen[(key.tag, k)]}, again on line {line}; YAML would silently keep "
                        "only the last one",
                    )
                seen[(key.tag, k)] = line
            self.positions[(*loc, k)] = (
                (at.line + 1, at.column + 1) if at else (line, key.start_mark.column + 1)
            )
            if key.tag == _YAML + "int" and k.isdigit():  # `8:` is the key 8 in the data
                self.positions[(*loc, int(k))] = self.positions[(*loc, k)]
            self.walk(value, (*loc, k), depth + 1, at or self.alias_at.get((id(node), id(key))))


class _Constructing:
    """Values the constructor cannot build (`2024-13-45`, a 5,000-digit number) become located
    YAML errors instead of Python exceptions."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)  # type: ignore[misc]
        except (ValueError, TypeError, OverflowError) as e:
            what = _short(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            why = f": {e}" if len(str(e)) <= 80 else ""
            raise ConstructorError(
                None, None, f"cannot read `{what}` as {_tag_name(node.tag)}{why}", node.start_mark
            ) from None


class _Loader(_Constructing, yaml.SafeLoader):
    """SafeLoader that refuses deep nesting, too many values or aliases (billion-laughs
    expansion), and locates the values it cannot construct."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.source = source
        self.aliases_seen = 0
        self.alias_at: dict[tuple[int, int], Any] = {}
        self.nodes = 0
        self.depth = 0

    def _fail(self, message: str) -> NoReturn:
        raise InputError(f"{_at(self.source, self.peek_event().start_mark)}: {message}")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases_seen += 1
            if self.aliases_seen > MAX_ALIASES:
                self._fail(f"more than {MAX_ALIASES} YAML aliases; refusing to expand")
            if parent is not None:
                slot = index if isinstance(index, int) else id(index)
                self.alias_at[(id(parent), slot)] = self.peek_event().start_mark
            return super().compose_node(parent, index)
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self._fail(f"more than {MAX_NODES:,} values in one document")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                self._fail(f"nesting deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


# libyaml (C) composes the same nodes, marks included, about ten times faster; it refuses deep
# nesting itself, and the walker still bounds the values counted through aliases. Only its
# messages about a repeated alias point at the anchor rather than at the repetition.
_CBase: Any = getattr(yaml, "CSafeLoader", None)
if _CBase is not None:

    class _CLoader(_Constructing, _CBase):
        def __init__(self, text: str, source: str) -> None:
            super().__init__(text)
            self.source = source


def parse_text(text: str, source: str, libyaml: bool = False) -> Located:
    """Parse YAML text safely; `source` names it in messages. `libyaml` parses with the C
    library where PyYAML has it (catalog files: large, and read at every start-up)."""
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise InputError(f"{source}: file larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        loader: Any = (
            _CLoader(text, source) if libyaml and _CBase is not None else _Loader(text, source)
        )
        try:
            node = loader.get_single_node()
            if node is None:
                raise InputError(f"{source}: the file is empty")
            walker = _Walker(source, getattr(loader, "alias_at", None))
            walker.walk(node, (), 0)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = e.problem or str(e)
        if e.context and e.problem:
            start = e.context_mark
            since = (
                f" (from line {start.line + 1})"
                if start and mark and start.line != mark.line
                else ""
            )
            what = f"{e.context}{since}: {e.problem}"
        if "'\\t'" in what:
            what += " (YAML indents with spaces: replace the tab with spaces)"
        raise InputError(f"{_at(source, mark)}: invalid YAML: {what}") from None
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        column = e.position - text.rfind("\n", 0, e.position)
        char = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
        raise InputError(
            f"{source}:{line}:{column}: invalid YAML: the character {char} is not allowed "
            f"({e.reason})"
        ) from None
    except yaml.YAMLError as e:
        raise InputError(f"{source}: invalid YAML: {e}") from None
    return Located(data, walker.positions, source)


def read_yaml(path: Path) -> Located:
    """Read and parse a YAML file (a regular file, bounded, UTF-8); errors name the file."""
    return parse_text(read_text(path, MAX_FILE_BYTES), str(path))


def read_validated(path: Path, model: type[M]) -> M:
    """A data file the planner ships or is given as a catalog (not a problem file), parsed with
    libyaml and validated against `model`. The parsed data is cached by the file's content, so
    later runs only validate it (see schema/data_cache.py); data that fails validation is parsed
    again for the located message."""
    text = read_text(path, MAX_FILE_BYTES)
    cached = data_cache.load(text, "catalog")
    if cached is not None:
        try:
            return model.model_validate(cached)
        except ValidationError:
            pass
    doc = parse_text(text, str(path), libyaml=True)
    parsed = validate(doc, model)
    if isinstance(doc.data, dict):
        data_cache.store(text, "catalog", doc.data)
    return parsed


def dotted(loc: Loc) -> str:
    parts: list[str] = []
    for p in loc:
        parts.append(f"[{p}]" if isinstance(p, int) else ("." if parts else "") + str(p))
    return "".join(parts) or "(top level)"


def _data_loc(data: Any, raw: Loc, missing: bool = False) -> Loc:
    """Drop the parts of a pydantic location that are not keys in the data (union tags such as
    `inference` or `function-after[...]`), keeping a final key when it is the `missing` one."""
    out: list[str | int] = []
    current = data
    for i, part in enumerate(raw):
        last = i == len(raw) - 1
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        ):
            out.append(part)
            current = current[part]  # type: ignore[index]
        elif missing and last and isinstance(part, str):
            out.append(part)
    return tuple(out)


def _value_at(data: Any, loc: Loc) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _models_at(model: type[BaseModel], loc: Loc, data: Any) -> list[type[BaseModel]]:
    """The pydantic models that may describe the mapping at `loc`: one, or several where a field
    holds a union (an inference or a training workload), those covering most keys first."""
    current = [model]
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        fields = current[0].model_fields
        if part not in fields:
            return []
        current = _models_in(fields[part].annotation)
        if not current:
            return []
        end = i + 2 if i + 1 < len(loc) and isinstance(loc[i + 1], int) else i + 1  # list item
        here = _value_at(data, loc[:end])
        keys = set(here) if isinstance(here, dict) else set()
        current.sort(key=lambda m: -len(keys & set(m.model_fields)))
    return current


def _missing_hint(model: type[BaseModel], loc: Loc, data: Any) -> str:
    """For a required key whose values are a fixed list (a Literal field, such as an engine's
    `kernels`): the line to add, with the values it may take; else nothing."""
    key = str(loc[-1]) if loc else ""
    for m in _models_at(model, loc[:-1], data):
        field = m.model_fields.get(key)
        if field is not None and get_origin(field.annotation) is Literal:
            choices = ", ".join(str(c) for c in get_args(field.annotation))
            return f"; add `{key}: ...` with one of: {choices}"
    return ""


def _unknown_key(key: str, models: list[type[BaseModel]]) -> str:
    """The message for a key no field has: the nearest valid keys, or the kind it belongs to."""
    refused = [m for m in models if key not in m.model_fields] or models
    valid = list(refused[0].model_fields) if refused else []
    owner = next((m for m in models if key in m.model_fields), None)
    kind = owner.model_fields.get("kind") if owner else None
    if kind is not None and isinstance(kind.default, str):
        return f"unknown key `{key}` here; it belongs to `kind: {kind.default}`: add that line"
    hint = did_you_mean(key, valid)
    if not hint and valid:
        hint = f" (valid keys: {', '.join(valid)})"
    return f"unknown key `{_short(key)}`{hint}"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()) or ():
        found += [m for m in _models_in(arg) if m not in found]
    return found


def _describe(value: Any) -> str:
    """What a wrong value is, in words a YAML writer knows."""
    if value is None:
        return "nothing (an empty value or `null`)"
    if isinstance(value, bool):
        return (
            f"`{str(value).lower()}`, a boolean (YAML reads unquoted yes/no/on/off/true/false as "
            'booleans: quote text, as in "no")'
        )
    if value is None:
        return "an empty value (a key with nothing after it, or `null`)"
    if isinstance(value, dict):
        return "a mapping (`key: value` lines)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text `{_short(value)}`"
    if isinstance(value, int | float):
        return f"the number `{value}` (quote it if it is text)"
    return f"`{_short(str(value))}` ({type(value).__name__})"


def _quoted(expected: str) -> list[str]:
    """The choices in pydantic's "'a', 'b' or 'c'" (text) or "50, 90 or 95" (numbers)."""
    return re.findall(r"'([^']*)'", expected) or [
        c.strip() for c in re.split(r",| or ", expected) if c.strip()
    ]


def _message(e: Any, doc: Located, model: type[BaseModel]) -> tuple[Loc, str]:
    """The key path and the text of one pydantic error."""
    kind = e["type"]
    loc = _data_loc(doc.data, tuple(e["loc"]), missing=kind == "missing")
    ctx = e.get("ctx") or {}
    value = e.get("input")
    msg = e["msg"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        msg = _unknown_key(key, _models_at(model, loc[:-1], doc.data))
    elif kind == "missing":
        msg = f"missing required key `{loc[-1]}`" + _missing_hint(model, loc, doc.data)
    elif kind == "value_error":
        at = getattr(ctx.get("error"), "at", None)
        if isinstance(at, tuple):
            loc = _data_loc(doc.data, (*tuple(e["loc"]), *at))
        msg = msg.removeprefix("Value error, ")
    elif kind == "literal_error":
        choices = _quoted(str(ctx.get("expected", "")))
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        got = f"`{_short(str(value))}`" if isinstance(value, str) or number else _describe(value)
        msg = f"got {got}; expected one of: {', '.join(choices)}{hint}"
        if isinstance(value, str) and value.strip() in choices:  # a quoted number
            msg = f"got the text `{_short(value)}`; write it as a number, without quotes (one of "
            msg += f"{', '.join(choices)})"
    elif kind == "union_tag_invalid":
        tag = str(ctx.get("tag"))
        choices = _quoted(str(ctx.get("expected_tags", "")))
        keys = [k for k, v in value.items() if str(v) == tag] if isinstance(value, dict) else []
        if keys:
            loc = (*loc, keys[0])
        msg = f"unknown {keys[0] if keys else 'kind'} `{_short(tag)}`; expected one of: "
        msg += ", ".join(choices) + did_you_mean(tag, choices)
    elif kind in ("model_type", "dict_type", "model_attributes_type"):
        msg = f"expected a mapping (`key: value` lines), got {_describe(value)}"
    elif kind == "finite_number":
        shown = "NaN (not a number)" if isinstance(value, float) and math.isnan(value) else value
        msg = f"got {shown}; write a finite number"
    elif kind == "list_type":
        msg = f"expected a list (`- item` lines), got {_describe(value)}"
    elif kind == "string_type":
        msg = f"expected text, got {_describe(value)}"
    elif kind in ("bool_type", "bool_parsing"):
        msg = f"expected true or false, got {_describe(value)}"
    elif kind == "string_too_long":
        msg = (
            f"text of {len(value) if isinstance(value, str) else '?'} characters, longer than the "
            f"limit of {ctx.get('max_length')}"
        )
    elif kind == "invalid_key":
        msg = f"keys must be text, got {_describe(value)}"
    elif kind == "string_too_short":
        msg = "must not be empty"
    elif kind == "too_long":
        count = ctx.get("actual_length")
        msg = f"{count if count is not None else 'too many'} items; at most "
        msg += f"{ctx.get('max_length')} are allowed"
    elif kind == "too_short":
        least = ctx.get("min_length")
        msg = f"needs at least {least} item{'' if least == 1 else 's'}"
    elif kind in _BOUNDS:
        word, key = _BOUNDS[kind]
        num = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        limit = ctx.get(key)
        shown = _number(limit) if isinstance(limit, int | float) else str(limit)
        msg = f"must be {word} {shown}" + (f", got {_number(num)}" if num is not None else "")
        if isinstance(num, float) and math.isnan(num):
            msg = "got NaN (not a number); write a number"
    return loc, msg


def _number(x: float) -> str:
    """A bound or a value as a reader compares them: whole numbers in full with separators,
    others to 9 significant digits (so a value just past its bound still shows the difference)."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,}" if isinstance(x, int) else f"{x:.9g}"


# pydantic's bound errors, in the words the planner's own limits use.
_BOUNDS = {
    "greater_than": ("more than", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("less than", "lt"),
    "less_than_equal": ("at most", "le"),
}


def format_validation_error(err: ValidationError, doc: Located, model: type[BaseModel]) -> str:
    """One line per problem: `file:line:col: key.path: what is wrong (hint)`."""
    lines = []
    errors = err.errors()
    for e in errors[:MAX_ERRORS]:
        loc, msg = _message(e, doc, model)
        lines.append(f"{doc.where(loc)}: {dotted(loc)}: {msg}")
    if len(errors) > MAX_ERRORS:
        lines.append(f"... and {len(errors) - MAX_ERRORS} more errors")
    return "\n".join(lines)


def validate(doc: Located, model: type[M]) -> M:
    """Validate a parsed document against `model`, raising InputError with located messages."""
    try:
        return model.model_validate(doc.data)
    except ValidationError as e:
        raise InputError(format_validation_error(e, doc, model)) from None
