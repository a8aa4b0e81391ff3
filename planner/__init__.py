def main() -> None:
    """The `planner` command. The command line is imported here, inside the guard, so Ctrl-C
    while the libraries load ends like any other: "interrupted" and exit code 130."""
    import sys

    try:
        from planner.cli import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)
