"""`--set PATH=VALUE`: change a parsed problem document before it is validated.

PATH is dotted: `constraints.budget_usd`, `horizon.procurement`, and `workloads.<name>.<key>`
(a workload by its name, or by its position: `workloads.0.context_tokens`). VALUE is YAML:
`800000`, `rent`, `"10 kW"`, `[h100-sxm, mi300x]`. The changed document is then validated like
the file itself, and an error in a changed value names the `--set` it came from.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from planner.errors import InputError, did_you_mean
from planner.schema.yaml_io import Located, dotted, parse_text

MAX_OVERRIDES = 64


def split_assignment(text: str, option: str = "--set") -> tuple[str, str]:
    """`PATH=VALUE` of a `--set` (or of the `option` named in errors, e.g. `--vary`)."""
    path, sep, value = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise InputError(f"{option} {text!r}: expected PATH=VALUE, e.g. constraints.budget_usd=8e5")
    if not value.strip():
        raise InputError(f"{option} {text!r}: the value after `=` is empty")
    return path, value


def _resolve(data: Any, parts: list[str], label: str) -> tuple[str | int, ...]:
    """Turn dotted parts into a key path of the document, naming a list's items (workloads,
    machines, links) by their name or id, or by index. `label` names the assignment in errors
    (`--set PATH=VALUE`)."""
    loc: list[str | int] = []
    node = data
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(node, list):
            # An item is named by its `id` (machines, links) or, in a list without ids, by its
            # `name` (workloads).
            ids = any(isinstance(w, dict) and "id" in w for w in node)
            field = "id" if ids else "name"
            names = [w.get(field) if isinstance(w, dict) else None for w in node]
            # Names may contain dots: take the longest run of parts that is a name.
            for j in range(len(parts), i, -1):
                name = ".".join(parts[i:j])
                if name in names:
                    loc.append(names.index(name))
                    node = node[names.index(name)]
                    i = j
                    break
            else:
                if part.isdigit() and int(part) < len(node):
                    loc.append(int(part))
                    node = node[int(part)]
                    i += 1
                    continue
                what = "workload" if tuple(loc) == ("workloads",) else "entry"
                named = [str(n) for n in names if n is not None]
                how = f"{'a' if what == 'workload' else 'an'} {what}'s {field} or its position"
                how = how if named else "its position"
                span = f"0 to {len(node) - 1}" if node else "the list is empty"
                raise InputError(
                    f"{label}: no {what} `{part}` in {dotted(tuple(loc))}"
                    f"{did_you_mean(part, named)} (use {how}, {span})"
                )
            continue
        if node is not None and not isinstance(node, dict):
            raise InputError(
                f"{label}: {dotted(tuple(loc))} is a single value, not a section with keys"
            )
        if node is None and loc and part.isdigit():
            raise InputError(
                f"{label}: {dotted(tuple(loc))} is not in the file, so it has no item "
                f"{part}; set the whole list, e.g. {'.'.join(map(str, loc))}=[...]"
            )
        loc.append(part)
        node = node.get(part) if isinstance(node, dict) else None
        i += 1
    return tuple(loc)


def resolved_path(doc: Located, path: str) -> str:
    """The dotted key path a `--set` PATH writes (a workload named by its position), so two
    spellings of one place compare equal."""
    return dotted(_resolve(doc.data, path.split("."), f"--set {path}"))


def _assign(data: dict[str, Any], loc: tuple[str | int, ...], value: Any) -> None:
    node: Any = data
    for part in loc[:-1]:
        if isinstance(node, dict) and node.get(part) is None:
            node[part] = {}  # a missing section, or one left empty (`constraints:` is null)
        node = node[part]
    node[loc[-1]] = value


def apply_overrides(
    doc: Located, pairs: Sequence[str], points: Sequence[str] = ()
) -> tuple[Located, dict[str, str]]:
    """The document with every `PATH=VALUE` applied (the user's `--set` pairs, then `points`: the
    values a sweep generates for its `--vary`), and which assignment wrote each dotted path, as
    errors name it (`--set PATH=VALUE`, `--vary point PATH=VALUE`)."""
    if len(pairs) + len(points) > MAX_OVERRIDES:
        raise InputError(f"--set: at most {MAX_OVERRIDES} overrides at once")
    if not pairs and not points:
        return doc, {}
    if not isinstance(doc.data, dict):
        raise InputError(f"{doc.source}: the problem must be a mapping of keys to use --set")
    data = copy.deepcopy(doc.data)
    origin: dict[str, str] = {}
    labelled = [("--set", t) for t in pairs] + [("--vary point", t) for t in points]
    for option, text in labelled:
        # A long value is named by its start: a list of 10,000 numbers once filled 20 kB of
        # every message about it.
        shown = text if len(text) <= 120 else f"{text[:100]}... ({len(text):,} characters)"
        label = f"{option} {shown}"
        path, raw = split_assignment(text, option)
        parts = path.split(".")
        if any(not p for p in parts):
            raise InputError(f"{label}: empty key in `{path}`")
        value = parse_text(raw, f"{option} {path}").data
        loc = _resolve(data, parts, label)
        _assign(data, loc, value)
        origin[dotted(loc)] = label
    return Located(data, doc.positions, doc.source), origin


def blame(err: InputError, origin: dict[str, str]) -> InputError:
    """Point error lines about overridden paths at the assignment that wrote them."""
    if not origin:
        return err
    lines = []
    for line in str(err).splitlines():
        for path, label in origin.items():
            at = next((line.find(f": {path}{c}") for c in ":.[" if f": {path}{c}" in line), -1)
            if at < 0:  # a message about a key the `--set` created, e.g. an unknown device id
                named = re.match(r"[^ ]*?: ([^ :]+): ", line)
                if named and path.startswith((named[1] + ".", named[1] + "[")):
                    at = named.start(1) - 2
            if at >= 0:
                line = f"{label}: {line[at + 2 :]}"
                break
        else:
            # A rule across fields, placed in the file, that an assignment's value broke.
            setters = [label for path, label in origin.items() if _mentions(line, path)]
            if setters:
                line += f" (as {', '.join(setters)} sets it)"
        lines.append(line)
    return InputError("\n".join(lines))


def _mentions(line: str, path: str) -> bool:
    """Whether the message names the overridden key `path` (written with dots or its last
    part in backquotes)."""
    dots = re.sub(r"\[(\d+)\]", r".\1", path)
    return dots in line or path in line
