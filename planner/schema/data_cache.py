"""A cache of parsed catalog files: the plain data of a YAML file, keyed by the file's content.

Parsing the shipped catalog's YAML takes most of a small command's start-up, while validating
the parsed data takes a few milliseconds; so the data (dicts, lists, text, numbers) is kept
after the first parse and the next run validates it again from the cache, with whatever schema
it has then. The key is a SHA-256 of the file's text, this cache format and the Python version,
so an edited file, a new schema or another Python never reads a stale entry.

Entries are `marshal` files (plain data only: loading one runs no code) in the user's cache
folder: `PLANNER_CACHE_DIR`, else `$XDG_CACHE_HOME/planner`, else `~/.cache/planner`; an empty
`PLANNER_CACHE_DIR` turns the cache off. Every failure (a folder that cannot be written, a
corrupt or foreign entry) only means the file is parsed again: the cache never changes a result
and never stops a command.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ENV_VAR = "PLANNER_CACHE_DIR"
FORMAT = 1  # raise when the kind of data stored changes
MAX_ENTRY_BYTES = 16 * 2**20
MAX_ENTRIES = 64  # oldest removed beyond this, so edited catalogs do not pile up


def cache_dir() -> Path | None:
    """The folder entries go in, or None when the cache is off."""
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return Path(env) if env else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "planner"


def _entry(text: str, kind: str) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    salt = f"{FORMAT}:{kind}:{sys.version_info[0]}.{sys.version_info[1]}\n"
    digest = hashlib.sha256((salt + text).encode("utf-8", "surrogatepass")).hexdigest()
    return folder / f"{kind}-{digest[:40]}.marshal"


def load(text: str, kind: str) -> dict[str, Any] | None:
    """The data stored for this text, or None (not stored, unreadable or not a mapping)."""
    try:
        path = _entry(text, kind)
        if path is None or path.stat().st_size > MAX_ENTRY_BYTES:
            return None
        data = marshal.loads(path.read_bytes())
    except (OSError, RuntimeError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def store(text: str, kind: str, data: dict[str, Any]) -> None:
    """Keep `data` for this text, if it is plain data and the folder can be written."""
    try:
        path = _entry(text, kind)
        if path is None:
            return
        blob = marshal.dumps(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".marshal")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _prune(path.parent, kind)
    except (OSError, ValueError, RuntimeError):
        return


def _prune(folder: Path, kind: str) -> None:
    entries = sorted(folder.glob(f"{kind}-*.marshal"), key=lambda p: p.stat().st_mtime)
    for old in entries[:-MAX_ENTRIES]:
        with contextlib.suppress(OSError):
            old.unlink()
