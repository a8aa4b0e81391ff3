"""Imported once by the local pool's fork server (planner.whatif.executor): reads the shipped
catalog and the efficiency tables there, so every worker forked from it starts with them in
memory instead of parsing the YAML again (about a second per worker). A catalog that does not
load is left to the worker, which reports it as the command line would."""

from __future__ import annotations

import contextlib

from planner.catalog import load_catalog
from planner.errors import PlannerError
from planner.estimator.efficiency import load_efficiency, load_serving

with contextlib.suppress(PlannerError):
    load_catalog()
    load_efficiency()
    load_serving()
