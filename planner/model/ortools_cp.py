"""OR-Tools' CP-SAT Python layer, imported without pandas.

`ortools.sat.python.cp_model` imports pandas at the top (about a quarter of a second, a third
of a whole `planner solve` on a small problem) only for its `*_series` helpers, which the
planner never calls; at import time it reads nothing from pandas but `pd.Index` and
`pd.Series`, to build a type alias. So the import runs with a stand-in module under the name
`pandas` that holds two placeholder classes, and the stand-in leaves `sys.modules` at once
afterwards, so any later `import pandas` gets the real one. cp_model keeps a lazy module in
place of `pd`: the first attribute read from it (only the `*_series` helpers read one) imports
the real pandas, so those helpers still work as documented.

The import runs with Ctrl-C held back (planner.process.libraries_loading): a KeyboardInterrupt
raised inside protobuf's start-up is printed by its C core and then lost.

Every module of planner/model imports OR-Tools from here: CP-SAT at import, the LP model
builder (`linear_solver()`, OR-Tools' linear-solver interface with HiGHS and GLOP) only when a
linear relaxation is solved. That interface takes about 40 ms to load, an eighth of a small
`planner solve`, and only problems of at least planner.solve.GUIDED_MIN_KEYS replica variables
solve one (none of the examples).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from planner.process import libraries_loading


class _LazyPandas(types.ModuleType):
    """Imports the real pandas at the first attribute read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)


def _stand_in() -> types.ModuleType | None:
    """Put a placeholder pandas in sys.modules unless pandas (or cp_model) is already loaded."""
    if "pandas" in sys.modules or "ortools.sat.python.cp_model" in sys.modules:
        return None
    mod = types.ModuleType("pandas", "placeholder while OR-Tools' cp_model imports")
    mod.Index = type("Index", (), {})  # type: ignore[attr-defined]
    mod.Series = type("Series", (), {})  # type: ignore[attr-defined]
    sys.modules["pandas"] = mod
    return mod


_placeholder = _stand_in()
try:
    with libraries_loading():
        from ortools.sat.python import cp_model, cp_model_helper
finally:
    if _placeholder is not None:
        if sys.modules.get("pandas") is _placeholder:
            del sys.modules["pandas"]
        _loaded = sys.modules.get("ortools.sat.python.cp_model")
        if getattr(_loaded, "pd", None) is _placeholder:
            _loaded.pd = _LazyPandas("pandas")  # type: ignore[union-attr]


def linear_solver() -> types.ModuleType:
    """OR-Tools' LP model builder (`model_builder_helper`), loaded at the first call, with
    Ctrl-C held back as for CP-SAT."""
    with libraries_loading():
        from ortools.linear_solver.python import model_builder_helper

    return model_builder_helper


def lp_solver() -> types.ModuleType:
    """OR-Tools' `pywraplp` (GLOP kept loaded between solves, so a solve after a change of
    variable bounds starts from the last basis), loaded at the first call as `linear_solver`."""
    with libraries_loading():
        return importlib.import_module("ortools.linear_solver.pywraplp")


__all__ = ["cp_model", "cp_model_helper", "linear_solver", "lp_solver"]
