"""Safe YAML loading that remembers where every key stands, so errors can name file, line and column.

Also turns pydantic validation errors into one-line messages with the location and a hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.errors import InputError, did_you_mean

MAX_FILE_BYTES = 4 * 2**20
MAX_DEPTH = 32
MAX_ALIASES = 100

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


def _walk(node: yaml.Node, loc: Loc, out: dict[Loc, tuple[int, int]], depth: int, src: str) -> None:
    if depth > MAX_DEPTH:
        raise InputError(f"{src}: nesting deeper than {MAX_DEPTH} levels at {_dotted(loc)}")
    out.setdefault(loc, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = key.value if isinstance(key, yaml.ScalarNode) else str(key)
            out[(*loc, k)] = (key.start_mark.line + 1, key.start_mark.column + 1)
            _walk(value, (*loc, k), out, depth + 1, src)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), out, depth + 1, src)


class _CountingLoader(yaml.SafeLoader):
    """SafeLoader that refuses documents with too many aliases (billion-laughs expansion)."""

    aliases_seen = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases_seen += 1
            if self.aliases_seen > MAX_ALIASES:
                raise InputError(f"more than {MAX_ALIASES} YAML aliases; refusing to expand")
        return super().compose_node(parent, index)


def parse_text(text: str, source: str) -> Located:
    """Parse YAML text safely; `source` names it in messages."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise InputError(f"{source}: file larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        loader = _CountingLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise InputError(f"{source}: the file is empty")
            positions: dict[Loc, tuple[int, int]] = {}
            _walk(node, (), positions, 0, source)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except InputError as e:
        msg = str(e)
        raise InputError(msg if msg.startswith(source) else f"{source}: {msg}") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise InputError(f"{where}: invalid YAML: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{source}: invalid YAML: {e}") from None
    return Located(data, positions, source)


def read_yaml(path: Path) -> Located:
    """Read and parse a YAML file; errors name the file."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise InputError(f"{path}: file larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read as UTF-8 text: {e}") from None
    return parse_text(text, str(path))


def _dotted(loc: Loc) -> str:
    parts: list[str] = []
    for p in loc:
        parts.append(f"[{p}]" if isinstance(p, int) else ("." if parts else "") + str(p))
    return "".join(parts) or "(top level)"


def _data_loc(data: Any, raw: Loc) -> Loc:
    """Drop the parts of a pydantic location that are not keys in the data (union tags such as
    `inference` or `function-after[...]`), keeping a final missing key."""
    out: list[str | int] = []
    current = data
    for i, part in enumerate(raw):
        last = i == len(raw) - 1
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        ):
            out.append(part)
            current = current[part]  # type: ignore[index]
        elif last and isinstance(part, str) and "[" not in part:
            out.append(part)
    return tuple(out)


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """Valid field names of the pydantic model found by walking `loc` (for misspelt keys)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        annotation = fields[part].annotation
        current = _model_in(annotation)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def format_validation_error(err: ValidationError, doc: Located, model: type[BaseModel]) -> str:
    """One line per problem: `file:line:col: key.path: what is wrong (hint)`."""
    lines = []
    for e in err.errors():
        loc = _data_loc(doc.data, tuple(e["loc"]))
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            key = str(loc[-1])
            valid = _fields_at(model, loc[:-1])
            msg = f"unknown key `{key}`{did_you_mean(key, valid)}"
            if not did_you_mean(key, valid) and valid:
                msg += f" (valid keys: {', '.join(valid)})"
        elif e["type"] == "missing":
            msg = f"missing required key `{loc[-1]}`"
        elif msg.startswith("Value error, "):
            msg = msg.removeprefix("Value error, ")
        elif e["type"] == "literal_error":
            msg = f"got {e.get('input')!r}; {msg.lower()}"
        lines.append(f"{doc.where(loc)}: {_dotted(loc)}: {msg}")
    return "\n".join(lines)


def validate(doc: Located, model: type[M]) -> M:
    """Validate a parsed document against `model`, raising InputError with located messages."""
    try:
        return model.model_validate(doc.data)
    except ValidationError as e:
        raise InputError(format_validation_error(e, doc, model)) from None
