def main() -> None:
    """The `planner` command. The command line is imported here, inside the guard, so Ctrl-C
    while the libraries load ends like any other: "interrupted" and exit code 130.

    Called from the program's top level (the `planner` script, `python -c`), it ends the
    process itself once everything is written (see `_exit`), and turns pydantic's plugins off
    (see process.no_pydantic_plugins); called from other code (tests, a program importing the
    planner), it raises SystemExit as usual and leaves pydantic as it is."""
    import signal
    import sys
    import time

    started = time.monotonic()
    whole_process = sys._getframe(1).f_globals.get("__name__") == "__main__"
    noted = False
    try:
        from planner.process import no_pydantic_plugins, note_ctrl_c, pause_gc

        noted = note_ctrl_c()
        if whole_process:
            no_pydantic_plugins()  # before pydantic loads
            pause_gc(whole_process=True)  # until the command's work begins (cli.user_errors)
        from planner.cli import main as run

        run(started)
    except (KeyboardInterrupt, Exception) as e:
        if not isinstance(e, KeyboardInterrupt):
            from planner.process import ctrl_c_in

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
            sys.unraisablehook = sys.__unraisablehook__
    if whole_process and (code is None or isinstance(code, int)):
        _exit(code or 0)
    if code is not None:
        sys.exit(code)


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
