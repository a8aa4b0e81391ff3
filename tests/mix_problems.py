"""Generated request mixes the enumeration tests share."""

from __future__ import annotations

from planner.schema.problem import Problem


def generated(devices: list[str], model: str, disaggregation: str, ttft: float) -> Problem:
    """A two-class mix of the kind test_mix_pruning generates, with an end-to-end ceiling."""
    return Problem.model_validate(
        {
            "name": "mix",
            "workloads": [
                {
                    "name": "bot",
                    "model": model,
                    "requests_per_s": 4.0,
                    "request_mix": [
                        {"name": "short", "input_tokens": 300, "output_tokens": 150, "share": 0.5},
                        {"name": "long", "input_tokens": 16000, "output_tokens": 600, "share": 0.5},
                    ],
                    "max_ttft_s": ttft,
                    "max_e2e_s": 30,
                    "disaggregation": disaggregation,
                }
            ],
            "constraints": {"allowed_devices": devices, "max_stages": 2},
            "objective": {"goal": "min_cost"},
        }
    )
