"""`planner serve`: the web explorer (needs the `web` extra)."""
