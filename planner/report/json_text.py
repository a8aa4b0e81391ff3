"""JSON as the planner prints it: strict JSON, whatever the figures hold.

Python's json module writes infinity and NaN as `Infinity` and `NaN`, which no JSON parser
accepts; a figure that is not a finite number is no figure, so it is written as null (the
same null a figure the estimate has none of takes)."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(data: Any) -> Any:
    """`data` with every float that is not finite (in dicts, lists and tuples) made None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite(v) for v in data]
    return data


def json_text(data: Any) -> str:
    """`data` as indented strict JSON, ending with a newline (non-finite floats as null)."""
    return json.dumps(finite(data), indent=2, sort_keys=False, default=str, allow_nan=False) + "\n"
