"""A request mix's model ties the devices bought to a host sold whole (an 8-GPU baseboard buys
its 8 GPUs) without the host's pick as the row's condition (Constraints._inventory_and_hosts):
a host not picked holds no hosts and so buys none, so the row holds for every plan either way,
and the relaxation keeps it at a fractional pick; where every host of a device is sold whole,
the devices bought are the slots of the hosts bought exactly. These checks hold the rows to
that: unconditional (and the equality) in a mix's model, conditional in other models, and a
mix's optimum is the one the conditional row gives."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from planner.catalog import load_catalog
from planner.load import load_problem
from planner.model.cpsat import PlannerModel
from planner.model.tables import Tables, build_tables
from planner.schema.problem import InferenceWorkload
from planner.schema.status import Status

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def _tables(tmp_path: Path, name: str, **workload: Any) -> Tables:
    raw = yaml.safe_load((PROBLEMS / f"{name}.yaml").read_text())
    raw["workloads"][0].update(workload)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return build_tables(load_problem(path), load_catalog())


def _mix(tmp_path: Path) -> Tables:
    # request-mix at 10 requests/s on L40S and H100 SXM (whose HGX baseboards are sold whole).
    return _tables(tmp_path, "request-mix", requests_per_s=10)


def _whole_rows(model: PlannerModel) -> list[tuple[tuple[str, str], Any]]:
    """The rows bought[d] >= slots x hosts_bought[d, h] of every host h sold whole, each with
    its (device, host) key."""
    proto = model.m.proto
    out = []
    for (dev, node), hb in model.hosts_bought.items():
        if not model.nodes[node].sold_whole:
            continue
        b = model.bought[dev].index
        for ct in proto.constraints:
            terms = dict(zip(ct.linear.vars, ct.linear.coeffs, strict=True))
            if set(terms) == {b, hb.index} and terms[b] > 0:  # not slots x hosts >= bought
                out.append(((dev, node), ct))
    return out


def _exact(model: PlannerModel, dev: str) -> Any:
    """The row between `dev`'s devices bought and the slots of its hosts bought."""
    want = {model.bought[dev].index} | {
        v.index for (d, _), v in model.hosts_bought.items() if d == dev
    }
    (row,) = [ct for ct in model.m.proto.constraints if set(ct.linear.vars) == want]
    return row


def test_a_mix_buys_a_whole_host_s_devices_without_the_pick_as_condition(
    tmp_path: Path,
) -> None:
    model = PlannerModel(_mix(tmp_path))
    rows = _whole_rows(model)
    assert len(rows) == 2  # hgx-h100-8 and hgx-h100-4
    assert all(not ct.enforcement_literal for _, ct in rows)
    # Both H100 hosts are sold whole: the devices bought are the slots of the hosts bought.
    b = model.bought["h100-sxm"].index
    hosts = {model.hosts_bought[k].index: model.nodes[k[1]].slots for k, _ in rows}
    exact = _exact(model, "h100-sxm")
    assert list(exact.linear.domain) == [0, 0]
    terms = dict(zip(exact.linear.vars, exact.linear.coeffs, strict=True))
    assert {v: c * terms[b] for v, c in terms.items()} == {
        b: 1,
        **{v: -n for v, n in hosts.items()},
    }


def test_other_problems_keep_the_pick_as_the_row_s_condition() -> None:
    model = PlannerModel(build_tables(load_problem(PROBLEMS / "chat-70b.yaml"), load_catalog()))
    rows = _whole_rows(model)
    assert rows
    assert all(list(ct.enforcement_literal) == [model.pick[k].index] for k, ct in rows)


def test_the_mix_s_rows_leave_the_optimum_as_it_was(tmp_path: Path) -> None:
    tables = _mix(tmp_path)
    kept = PlannerModel(tables)
    put_back = PlannerModel(tables)
    for k, ct in _whole_rows(put_back):  # the row as it was: enforced by the host's pick
        ct.enforcement_literal.append(put_back.pick[k].index)
    exact = _exact(put_back, "h100-sxm")  # and the slots bought at least the devices bought
    sign = dict(zip(exact.linear.vars, exact.linear.coeffs, strict=True))[
        put_back.bought["h100-sxm"].index
    ]
    exact.linear.domain.clear()
    exact.linear.domain.extend([-(2**63) + 1, 0] if sign > 0 else [0, 2**63 - 1])
    for ct in _covers(put_back):  # and no per-class cover on the replicas
        ct.linear.domain.clear()
        ct.linear.domain.extend([-(2**63) + 1, 2**63 - 1])
    a = kept.solve(time_limit=60, workers=1, seed=0)
    b = put_back.solve(time_limit=60, workers=1, seed=0)
    assert a.status == b.status == Status.OPTIMAL
    assert a.objective == b.objective


def _covers(model: PlannerModel) -> list[Any]:
    """The per-class cover rows: over replica variables alone, under the requests family."""
    lit = model.named["requests:assistant"].index
    replicas = {v.index for v in model.R.values()}
    return [
        ct
        for ct in model.m.proto.constraints
        if list(ct.enforcement_literal) == [lit] and set(ct.linear.vars) <= replicas
    ]


def test_each_class_is_covered_by_the_replicas_at_their_whole_time(tmp_path: Path) -> None:
    tables = _mix(tmp_path)
    model = PlannerModel(tables)
    rows = _covers(model)
    assert len(rows) == 4  # chat and documents, each prefilled and decoded (split designs)
    serves = tables.serves["assistant"]
    by_index = {v.index: k.design for k, v in model.R.items()}
    for ct in rows:
        for v, c in zip(ct.linear.vars, ct.linear.coeffs, strict=True):
            # SHARE_STEPS (1,000) x the design's rate in milli-requests/s, rounded down.
            rates = {int(r * 1000 + 1e-9) * 1000 for r in serves[by_index[v]].values()}
            assert abs(c) in rates


def test_a_design_s_replicas_stop_at_what_serves_every_class_alone(tmp_path: Path) -> None:
    tables = _mix(tmp_path)
    model = PlannerModel(tables)
    w = tables.problem.workloads[0]
    assert isinstance(w, InferenceWorkload)
    assert w.request_mix is not None and w.requests_per_s is not None
    for key, ub in model.R_ub.items():
        # Steps of replica time (1,000 a replica) that serve each class at the design's rate,
        # in the request row's integers: milli-requests/s x 1,000 over milli-requests/s.
        steps = 0
        for k, rate in tables.serves["assistant"][key.design].items():
            need = math.ceil(w.requests_per_s * w.request_mix[k].share * 1e6 - 1e-9)
            steps += -(-need // int(rate * 1000 + 1e-9))
        assert (ub - 1) * 1000 < steps <= ub * 1000 or (ub == 1 and steps <= 1000)
