"""The one door for files: every file the planner reads (problem, config.json, plan, measurements,
catalog) comes in through `read_text`, and every file it writes goes out through `write_atomic`.

Reading takes regular files only: a FIFO would block for ever, /dev/zero or /dev/urandom would be
read until memory runs out, and a directory is not a file. The device is opened without blocking
and checked with `fstat` on the open descriptor (so a file swapped between a check and the open
cannot slip through), then at most `max_bytes` + 1 bytes are read. Text is UTF-8, with or without
a byte-order mark; a UTF-16 or UTF-32 file is named as such, and a byte that is not UTF-8 is
reported by line and column.

Writing goes through a temporary file in the target's folder and a rename, so a reader never sees
half a file: through a symbolic link to its real target, only onto a regular file (or a new one),
with the target's mode kept (a new file gets the umask's), and the temporary file removed on
every failure, Ctrl-C included.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from planner.errors import InputError

MAX_READ_BYTES = 4 * 2**20  # 4 MiB: the largest problem or config.json is a few KiB
_OTHER_ENCODINGS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),  # before UTF-16: its mark starts with UTF-16's
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_regular(shown: str, mode: int) -> str:
    """The words every reader refuses a non-regular file with: `shown` (its path as the
    message names it), what it is, and what to give."""
    return f"{shown}: {_kind(mode)}, not a regular file; give a file's path"


def irregular_kind(path: Path) -> int | None:
    """The mode of `path` when it exists and is no regular file (a folder, a FIFO, a device,
    through any symbolic link), for `not_regular`; None for a regular file or no file. Not
    opened: a FIFO is not waited on."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # none there, a name too long, a NUL byte
        return None
    return None if stat.S_ISREG(mode) else mode


def _near_names(path: Path) -> str:
    """Files in the same folder whose names are close to the missing one's, quoted."""
    from difflib import get_close_matches

    try:
        names = [p.name for p in itertools.islice(path.parent.iterdir(), 5000)]
    except OSError:
        return ""
    close = get_close_matches(path.name, names, n=3, cutoff=0.6)
    return " or ".join(f"`{path.parent / c}`" for c in close)


def read_bytes(path: Path, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; InputError naming the path otherwise."""
    if str(path) == "-" and not path.exists():
        raise InputError(
            "-: reading from standard input is not supported; save the text to a file and give "
            "its path"
        )
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        near = _near_names(path)
        raise InputError(
            f"{path}: no such file"
            + (
                f"; did you mean {near}?"
                if near
                else "; check the path (relative to the folder the command runs in)"
            )
        ) from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(not_regular(str(path), mode))
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(2**20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise InputError(f"{path}: file larger than {max_bytes // 2**20} MiB")
    return b"".join(chunks)


def decode_utf8(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); an undecodable byte is named by its line
    and column, and a UTF-16 or UTF-32 file by its encoding."""
    for bom, name in _OTHER_ENCODINGS:
        if data.startswith(bom):
            raise InputError(f"{source}: the file is {name} text; save it as UTF-8")
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8", "replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        raise InputError(
            f"{source}:{line}:{column}: cannot read as UTF-8 text: the byte "
            f"0x{data[e.start]:02X} is not UTF-8 (save the file as UTF-8)"
        ) from None


def read_text(path: Path, max_bytes: int = MAX_READ_BYTES) -> str:
    """The UTF-8 text of a regular file (see the module's docstring for what is refused)."""
    return decode_utf8(read_bytes(path, max_bytes), str(path))


def read_json(path: Path, max_bytes: int = MAX_READ_BYTES) -> Any:
    """A JSON file read through `read_text`: errors name the file, line and column; NaN and
    Infinity (not JSON, though Python writes them) are refused."""
    text = read_text(path, max_bytes)

    def refuse(name: str) -> Any:
        raise ValueError(f"`{name}` is not a number JSON allows")

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except ValueError as e:
        raise InputError(f"{path}: invalid JSON: {e}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: nested too deeply") from None


def out_target(
    path: Path,
    option: str = "--out",
    *,
    keep: Path | None = None,
    suffixes: tuple[str, ...] = (),
) -> tuple[Path, os.stat_result | None]:
    """The real file `--out` will replace (symbolic links followed) and its status (None when
    new); InputError when it is not a regular file, its folder is missing, it is the input file
    `keep` (the problem the command reads), or its suffix is not one of `suffixes` (when given).
    Called before a long solve too, so a bad `--out` fails at once."""
    target = Path(os.path.realpath(path))  # through symbolic links, to the file they name
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{path}: {_kind(st.st_mode)}, not a regular file; {option} writes regular files only"
        )
    if not target.parent.is_dir():
        raise InputError(f"{path}: cannot write: the folder {target.parent} does not exist")
    if keep is not None and target == Path(os.path.realpath(keep)):
        raise InputError(
            f"{path}: {option} names the problem file this command reads; writing there would "
            f"replace the problem. Name another file, e.g. {path.with_suffix('').name}-plan.json"
        )
    if suffixes and path.suffix.lower() not in suffixes:
        raise InputError(
            f"{path}: {option} writes {' or '.join(suffixes)} files; "
            f"name the file with one of those suffixes"
        )
    return target, st


def new_mode(st: os.stat_result | None) -> int:
    """The permission bits a replaced file keeps, or those the umask gives a new file."""
    if st is not None:
        return stat.S_IMODE(st.st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename (see the module docstring)."""
    target, st = out_target(path)
    mode = new_mode(st)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
