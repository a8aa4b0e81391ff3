"""A managed API as a way to serve: what its published per-token prices charge for the tokens a
plan serves.

Conventions:
- Output tokens are the plan's served tokens (the demand, not spare capacity). Prompt tokens
  come with them at the workload's ratio: prompt / output tokens of a fixed-rate workload, and
  for a request mix its classes' input and output tokens weighted by their shares. Every prompt
  token is billed at the prompt price (prefix-cache discounts some providers give are not
  counted).
- Only problems with one inference workload and no training are priced: an API serves a model,
  it does not train one, and a single workload's tokens are the plan's.
- The cheapest provider the catalog lists for the model is the API's price.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog import Catalog
from planner.schema.catalog import ApiPrice
from planner.schema.problem import InferenceWorkload, Problem


@dataclass(frozen=True)
class ApiQuote:
    price: ApiPrice
    output_tokens: float
    prompt_tokens: float

    @property
    def usd(self) -> float:
        return (
            self.output_tokens * self.price.completion_usd_per_m
            + self.prompt_tokens * self.price.prompt_usd_per_m
        ) / 1e6


def prompt_per_output(w: InferenceWorkload) -> float:
    """Prompt tokens billed per output token (module conventions)."""
    if w.request_mix is not None:
        out = sum(c.share * c.output_tokens for c in w.request_mix)
        return sum(c.share * c.input_tokens for c in w.request_mix) / out
    return w.prompt_tokens / w.output_tokens


def api_workload(problem: Problem) -> InferenceWorkload | None:
    """The one inference workload an API could serve, or None (module conventions)."""
    inference = [w for w in problem.workloads if isinstance(w, InferenceWorkload)]
    if len(inference) != 1 or len(problem.workloads) != 1:
        return None
    return inference[0]


def cheapest_api(problem: Problem, cat: Catalog, output_tokens: float) -> ApiQuote | None:
    """The cheapest catalog API for the problem's workload at `output_tokens` served, or None
    when the problem is not one an API prices or its model has no API price."""
    w = api_workload(problem)
    if w is None or w.model not in cat.models:
        return None
    prompt = output_tokens * prompt_per_output(w)
    quotes = [ApiQuote(p, output_tokens, prompt) for p in cat.model(w.model).api_prices]
    return min(quotes, key=lambda q: (q.usd, q.price.provider), default=None)
