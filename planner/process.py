"""The `planner` command's own process: Ctrl-C that surfaces as another error (or is lost), Ctrl-C
held back while compiled libraries load, the garbage collector paused while a command starts,
and pydantic's plugins off."""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
import types
from collections.abc import Iterator
from typing import Any

# Ctrl-C that surfaces as another error (see ctrl_c_in).
_ctrl_c_seen: list[bool] = []
_holding: list[bool] = []  # inside libraries_loading: Ctrl-C is noted, raised on leaving


def _on_ctrl_c(signum: int, frame: object) -> None:
    """Python's own SIGINT handler, which also remembers that Ctrl-C came (and, while a
    compiled library loads, only remembers it: see libraries_loading)."""
    _ctrl_c_seen.append(True)
    if not _holding:
        raise KeyboardInterrupt


@contextlib.contextmanager
def libraries_loading() -> Iterator[None]:
    """Hold Ctrl-C back while a compiled library loads, and raise it once the load is done.

    A KeyboardInterrupt raised inside a module that compiled code imports is not always
    passed on: protobuf's C core, importing its own Python modules while OR-Tools loads,
    prints the traceback and goes on, so the user would see a traceback and then a solve that
    runs to its time limit. Inside this block the `planner` command's handler only notes the
    signal; the block raises KeyboardInterrupt on leaving, where Python code catches it like
    any other. Elsewhere (a caller's own handler, an ignored Ctrl-C) nothing changes."""
    if signal.getsignal(signal.SIGINT) is not _on_ctrl_c:
        yield
        return
    before = len(_ctrl_c_seen)
    _holding.append(True)
    try:
        yield
    finally:
        _holding.pop()
    if len(_ctrl_c_seen) > before:
        raise KeyboardInterrupt


def note_ctrl_c() -> bool:
    """For the `planner` command: put `_on_ctrl_c` in place of Python's default handler (never
    over an ignored Ctrl-C or a caller's own handler); whether it was put."""
    _ctrl_c_seen.clear()
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        signal.signal(signal.SIGINT, _on_ctrl_c)
    except ValueError:  # not the main thread
        return False
    sys.unraisablehook = _quiet_ctrl_c
    return True


def _quiet_ctrl_c(unraisable: Any) -> None:
    """Python reports an error it cannot raise ("Exception ignored in ...", as when Ctrl-C lands
    in a module lock's clean-up while a library loads) and goes on: Ctrl-C noted there is
    kept (`ctrl_c_noted`) and not printed as a traceback; anything else is reported as ever."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def ctrl_c_noted() -> bool:
    """Whether Ctrl-C came since the command began (even where an error it raised was lost)."""
    return bool(_ctrl_c_seen)


def ctrl_c_in(error: BaseException) -> bool:
    """Whether `error` is Ctrl-C or was raised by it. A SIGINT that lands while compiled code
    runs Python surfaces as another error: `ImportError: initialization failed` caused by the
    KeyboardInterrupt while OR-Tools' solver core loads, or a pydantic `SchemaError` that only
    quotes it while a model class is built. So a Ctrl-C noted by the command's handler counts
    too."""
    if _ctrl_c_seen:
        return True
    seen: set[int] = set()
    at: BaseException | None = error
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False


_gc_paused: list[bool] = []
_gc_freeze: list[bool] = []  # set for the `planner` process itself (not for in-process callers)


def pause_gc(whole_process: bool = False) -> None:
    """Pause the garbage collector while a command starts: its imports make hundreds of
    thousands of objects (modules, classes, functions) that live as long as the process, and
    collections that scan them cost about a tenth of a small solve. In the `planner` process
    itself (`whole_process`) resume_gc then freezes them (gc.freeze), so no later collection
    scans them either; a caller's process keeps its collector as it was. A collector already
    off stays as it is."""
    if whole_process:
        _gc_freeze[:] = [True]
    if gc.isenabled():
        gc.disable()
        _gc_paused.append(True)


def resume_gc() -> None:
    """Turn the collector back on if pause_gc turned it off."""
    if _gc_paused:
        _gc_paused.clear()
        if _gc_freeze:
            gc.freeze()
        gc.enable()


PLUGINS_OFF = ("__all__", "1", "true")  # the values of PYDANTIC_DISABLE_PLUGINS that turn all off
_LOADER = "pydantic.plugin._loader"
_stand_in: list[types.ModuleType] = []  # the stand-in loader, while it is in place


def no_pydantic_plugins() -> None:
    """Turn pydantic's plugins off for the `planner` process, before pydantic loads.

    Pydantic looks for plugins (the `pydantic` entry-point group, e.g. an observability tool's)
    when it builds its first model: it imports importlib.metadata (with email, zipfile and csv)
    and reads the metadata of every installed distribution, 15-20 ms of a 0.5 s command. A
    plugin only watches validations: none changes what the planner computes or prints, and the
    planner's own process is not an application a plugin is installed to observe. So the
    command sets PYDANTIC_DISABLE_PLUGINS=__all__ unless the user set it
    (`PYDANTIC_DISABLE_PLUGINS=` keeps every plugin; its worker processes inherit it), and, when
    every plugin is off, puts in place of pydantic's plugin loader a module whose
    `get_plugins()` gives none, as pydantic's own does then, without importing
    importlib.metadata. Anything else asked of that module loads the real one. The planner
    imported as a library (tests, other programs) does not call this."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] not in PLUGINS_OFF or "pydantic" in sys.modules:
        return
    stand_in = types.ModuleType(_LOADER, "no pydantic plugins (planner.process)")
    stand_in.get_plugins = _no_plugins  # type: ignore[attr-defined]
    stand_in.__getattr__ = _real_loader  # type: ignore[method-assign]
    _stand_in[:] = [stand_in]
    sys.modules[_LOADER] = stand_in


def _no_plugins() -> tuple[()]:
    return ()


def _real_loader(name: str) -> Any:
    """A name the stand-in loader lacks, read from pydantic's own loader (then loaded in its
    place). Module attributes it lacks (`__path__`, which `from ... import` asks for) it has not."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    if _stand_in and sys.modules.get(_LOADER) is _stand_in[0]:
        del sys.modules[_LOADER]
    _stand_in.clear()
    return getattr(importlib.import_module(_LOADER), name)
