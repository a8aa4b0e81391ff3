def main() -> None:
    """The `planner` command. The command line is imported here, inside the guard, so Ctrl-C
    while the libraries load ends like any other: "interrupted" and exit code 130.

    Called from the program's top level (the `planner` script, `python -c`), it ends the
    process itself once everything is written (see `_exit`); called from other code (tests), it
    raises SystemExit as usual."""
    import signal
    import sys
    import time

    started = time.monotonic()
    whole_process = sys._getframe(1).f_globals.get("__name__") == "__main__"
    noted = _note_ctrl_c()
    try:
        from planner.cli import main as run

        run(started)
    except (KeyboardInterrupt, Exception) as e:
        if not ctrl_c_in(e):
            raise
        sys.stderr.write("interrupted (Ctrl-C)\n")
        code: str | int | None = 130
    except SystemExit as e:
        if not whole_process:
            raise
        code = e.code
    else:
        code = None
    finally:
        if noted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if whole_process and (code is None or isinstance(code, int)):
        _exit(code or 0)
    if code is not None:
        sys.exit(code)


_ctrl_c_seen: list[bool] = []


def _on_ctrl_c(signum: int, frame: object) -> None:
    """Python's own SIGINT handler, which also remembers that Ctrl-C came."""
    _ctrl_c_seen.append(True)
    raise KeyboardInterrupt


def _note_ctrl_c() -> bool:
    """Put `_on_ctrl_c` in place of Python's default handler (never over an ignored Ctrl-C or a
    caller's own handler); whether it was put."""
    import signal

    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        signal.signal(signal.SIGINT, _on_ctrl_c)
    except ValueError:  # not the main thread
        return False
    return True


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


def _exit(code: int) -> None:
    """End the process with `code` without tearing the interpreter down: freeing every module
    of numpy, OR-Tools and pydantic one by one takes a good part of a second and does nothing
    for the user. Done only once all output is flushed, the exit handlers have run (they remove
    temporary files and join child processes) and no thread but this one is still working;
    otherwise the ordinary `sys.exit`."""
    import atexit
    import os
    import sys
    import threading

    busy = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and t.is_alive() and not t.daemon
    ]
    mp = sys.modules.get("multiprocessing")
    if busy or (mp is not None and mp.active_children()):
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: let Python report it as it would
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)
