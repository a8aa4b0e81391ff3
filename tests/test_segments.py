"""Links per network segment and per machine pair (docs/networks.md): the route a pipeline hop
crosses between two machines, what it costs, the optimizer keeping stages on the fast side of a
slow uplink, the plan's split lines and the verifier's recomputation of them, and the loader's
errors for names that do not fit."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.catalog import load_catalog
from planner.errors import InputError
from planner.estimator.network import network_link
from planner.estimator.replica import StageSpec, inference_replica
from planner.estimator.routes import Route, hop_routes, kind_route, route, simple_path
from planner.load import load_problem, parse_problem
from planner.plan.io import dumps_plan, plan_document, plan_from_data
from planner.schema.problem import Problem
from planner.schema.yaml_io import Located
from planner.solve import solve_problem
from planner.verify_hops import hop_seconds
from planner.verify_plan import plan_failures

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"
POOL = PROBLEMS / "home-and-lab-pool.yaml"
HIDDEN = 8192  # Llama 3.1 70B's hidden size (its config.json)


def _doc() -> dict[str, Any]:
    return dict(yaml.safe_load(POOL.read_text()))


def _problem(doc: dict[str, Any]) -> Problem:
    return parse_problem(Located(copy.deepcopy(doc), {}, "test.yaml"), [])


def _ids(r: Route) -> list[str]:
    return [lk.id for lk in r.links]


def test_the_most_specific_statement_picks_the_route() -> None:
    """Machine pair > same kind's network > same segment > between segments; each end's
    `attach` joins its segment."""
    cat, problem = load_catalog(), load_problem(POOL)
    studio, mini, xtx, lab = "m4-max-128gb", "m4-pro-64gb", "rx-7900-xtx", "rtx-5060-ti-16gb"
    assert _ids(route(problem, cat, studio, mini)) == ["studio-mini-tb5"]  # the cable
    assert _ids(route(problem, cat, mini, studio)) == ["studio-mini-tb5"]  # either way
    assert _ids(route(problem, cat, mini, mini)) == ["home-lan"]  # two minis: the segment
    assert _ids(route(problem, cat, xtx, mini)) == ["wifi-6", "home-lan"]
    assert _ids(route(problem, cat, mini, xtx)) == ["home-lan", "wifi-6"]
    assert _ids(route(problem, cat, xtx, xtx)) == ["wifi-6", "home-lan", "wifi-6"]
    assert _ids(route(problem, cat, mini, lab)) == ["home-lan", "vpn", "lab-lan"]
    assert _ids(route(problem, cat, lab, xtx)) == ["lab-lan", "vpn", "home-lan", "wifi-6"]
    assert _ids(route(problem, cat, lab, lab)) == ["lab-lan"]


def test_segments_no_link_joins_meet_on_the_network() -> None:
    """Without the VPN, home and lab meet on constraints.network; a machine on no segment sits
    on it; a kind's own `network` joins two of its machines."""
    cat = load_catalog()
    doc = _doc()
    doc["links"] = [x for x in doc["links"] if x["id"] != "vpn"]
    doc["machines"][3].pop("segment")  # the lab PCs on constraints.network (home-lan)
    doc["machines"][1]["network"] = "thunderbolt5"  # a Thunderbolt ring of minis
    problem = _problem(doc)
    mini, lab = "m4-pro-64gb", "rtx-5060-ti-16gb"
    # constraints.network is the home segment's own link: one network, crossed once
    assert _ids(route(problem, cat, lab, mini)) == ["home-lan"]
    assert _ids(route(problem, cat, mini, mini)) == ["thunderbolt5"]
    doc = _doc()
    doc["links"] = [x for x in doc["links"] if x["id"] != "vpn"]
    doc["constraints"]["network"] = "eth-10g"
    assert _ids(route(_problem(doc), cat, mini, lab)) == ["home-lan", "eth-10g", "lab-lan"]


def test_a_hop_pays_every_latency_and_the_slowest_bandwidth() -> None:
    """Hand arithmetic: bytes = hidden x 2 bytes x batch; seconds = sum of latencies + bytes /
    slowest bandwidth (Hockney's model along the path, docs/networks.md)."""
    cat, problem = load_catalog(), load_problem(POOL)
    nbytes = HIDDEN * 2 * 8  # batch 8: 131,072 bytes
    # home-lan > vpn > lab-lan: 0.5 + 10 + 0.1 ms; the VPN's 0.1 Gb/s = 12.5e6 bytes/s
    r = route(problem, cat, "m4-pro-64gb", "rtx-5060-ti-16gb")
    assert math.isclose(float(r.seconds(nbytes)), 10.6e-3 + 131_072 / 12.5e6, rel_tol=1e-12)
    # the Thunderbolt 5 cable alone: 8 us + 131,072 / 10e9 (80 Gb/s)
    r = route(problem, cat, "m4-max-128gb", "m4-pro-64gb")
    assert math.isclose(float(r.seconds(nbytes)), 8e-6 + 131_072 / 10e9, rel_tol=1e-12)
    # wifi-6 (2 ms, 0.0625 GB/s in the catalog) > home-lan (0.5 ms, 1 Gb/s)
    r = route(problem, cat, "rx-7900-xtx", "m4-pro-64gb")
    assert math.isclose(float(r.seconds(nbytes)), 2.5e-3 + 131_072 / 62.5e6, rel_tol=1e-12)
    # One link costs what it did alone: the route of constraints.network is that link.
    net = network_link(problem, cat)
    alone = kind_route(problem, cat, None, None)
    assert alone.links == (net,)
    assert float(alone.seconds(nbytes)) == net.latency_us * 1e-6 + nbytes / (
        net.bandwidth_gb_s * 1e9
    )


def test_each_stage_is_charged_its_own_hop() -> None:
    """A pipeline of the Wi-Fi desktop and two minis: each stage's step carries the hop to the
    next stage over its own route (its kind's slowest), where one network charged every hop
    alike. The difference per stage is exactly the routes' difference, in the decode-only
    iterations and in those carrying a prompt chunk, whose tokens cross the hop too."""
    cat, problem = load_catalog(), load_problem(POOL)
    m = cat.model("llama-3.1-70b")
    devs = ["rx-7900-xtx", "m4-pro-64gb", "m4-pro-64gb"]
    routes = hop_routes(problem, cat, devs, [1, 1, 1])
    assert [r.id for r in routes] == ["wifi-6 > home-lan", "home-lan", "home-lan > wifi-6"]
    link = network_link(problem, cat)  # home-lan

    def figures(with_routes: bool) -> list[float]:
        stages = [
            StageSpec(cat.accelerator(d), 1, n, hop=routes[j] if with_routes else None)
            for j, (d, n) in enumerate(zip(devs, [32, 24, 24], strict=True))
        ]
        fig = inference_replica(
            m, "q4_k_m", "q8_0", batch=4, context=4096, prompt=512, output=256,
            stages=stages, link=link,
        )  # fmt: skip
        return [s.seconds for s in fig.stages]

    # Batch 4, prompt 512, output 256: 4 x 512 / 256 = 8 prompt tokens per iteration, in chunks
    # of the room, max(256, ceil(1.5 x 8)) = 256 tokens (catalog serving.yaml), in a share
    # f = 8 / 256 of the iterations (serving.chunk_mix). Forward, every token's hidden states:
    # 4 x 8,192 x 2 = 65,536 bytes decoding, (4 + 256) x 8,192 x 2 = 4,259,840 with a chunk;
    # back from the last mini, the sampled ids: 4 x 8 = 32 bytes, (4 + 256 / 512) x 8 = 36.
    f = 8 / 256

    def wifi(n: float) -> float:  # wifi-6 > home-lan
        return 2.5e-3 + n / 62.5e6

    def lan(n: float) -> float:  # home-lan
        return 0.5e-3 + n / 125e6

    fwd_d, fwd_c = HIDDEN * 2 * 4, HIDDEN * 2 * (4 + 256)
    desk = (1 - f) * (wifi(fwd_d) - lan(fwd_d)) + f * (wifi(fwd_c) - lan(fwd_c))
    # The minis' slowest hop: the lan forward or the ids back over Wi-Fi, where one network
    # charged the lan forward (its return smaller): 2.500512 ms vs 1.024288 ms decoding; with
    # a chunk the lan forward, 34.58 ms, is the slowest either way.
    minis = (1 - f) * (max(lan(fwd_d), wifi(32)) - lan(fwd_d)) + f * (
        max(lan(fwd_c), wifi(36)) - lan(fwd_c)
    )
    got = [a - b for a, b in zip(figures(True), figures(False), strict=True)]
    for g, want in zip(got, [desk, minis, minis], strict=True):
        assert math.isclose(g, want, rel_tol=1e-9), (got, desk, minis)
    assert math.isclose(desk, 3.572864e-3, rel_tol=1e-9)  # hand sums of the lines above
    assert math.isclose(minis, 31 / 32 * 1.476224e-3, rel_tol=1e-9)


def test_a_route_crosses_each_network_once() -> None:
    """A network named twice by the route rule is crossed once and pays its latency once.
    home-lan: 0.5 ms, 1 Gb/s = 125e6 bytes/s; wifi-6: 2 ms, 62.5e6 bytes/s (catalog)."""
    cat, nbytes = load_catalog(), HIDDEN * 2 * 4  # batch 4: 65,536 bytes
    mini, xtx, lab = "m4-pro-64gb", "rx-7900-xtx", "rtx-5060-ti-16gb"
    doc = _doc()
    doc["machines"][2]["attach"] = "home-lan"  # the desktop hangs off home by home-lan itself
    r = route(_problem(doc), cat, xtx, mini)
    assert r.id == "home-lan"
    # 0.5 ms + 65,536 / 125e6 s = 1.024288 ms, not 1.524288 ms (the latency twice)
    assert math.isclose(float(r.seconds(nbytes)), 1.024288e-3, rel_tol=1e-12)
    # A lab PC on no segment: constraints.network (home-lan) and the home segment's link,
    # which are one network.
    doc = _doc()
    doc["machines"][3]["segment"] = None
    problem = _problem(doc)
    assert route(problem, cat, lab, mini).id == "home-lan"
    assert route(problem, cat, mini, lab).id == "home-lan"
    r = route(problem, cat, lab, xtx)
    assert r.id == "home-lan > wifi-6"
    # 0.5 + 2 ms + 65,536 / 62.5e6 s = 3.548576 ms
    assert math.isclose(float(r.seconds(nbytes)), 3.548576e-3, rel_tol=1e-12)
    # Two segments on one link are joined by it alone (home-lan > vpn > home-lan is a loop).
    doc = _doc()
    doc["segments"][1]["link"] = "home-lan"
    problem = _problem(doc)
    assert route(problem, cat, mini, lab).id == "home-lan"
    assert route(problem, cat, xtx, lab).id == "wifi-6 > home-lan"
    # Each Wi-Fi machine's own leg stays: two desktops cross the air twice.
    assert route(load_problem(POOL), cat, xtx, xtx).id == "wifi-6 > home-lan > wifi-6"


def test_loops_are_cut_where_a_link_comes_back() -> None:
    """Loop erasure: from a link's first crossing up to its repeat, the links go."""
    cat = load_catalog()
    a, b, c = (cat.links[x] for x in ("eth-10g", "wifi-6", "eth-1g"))
    assert simple_path([a, b, a, c]) == (a, c)
    assert simple_path([a, a, b, b]) == (a, b)
    assert simple_path([a, b, c, b]) == (a, b)
    assert simple_path([a, b, c]) == (a, b, c)


def test_the_verifier_pays_a_repeated_link_once() -> None:
    """The verifier's own arithmetic counts each link once, whatever the route lists."""
    cat = load_catalog()
    lan = network_link(load_problem(POOL), cat)  # home-lan: 0.5 ms, 125e6 bytes/s
    n = HIDDEN * 2 * 4
    assert math.isclose(hop_seconds(Route((lan, lan)), n), 0.5e-3 + n / 125e6, rel_tol=1e-12)


def _solve(doc: dict[str, Any]) -> Any:
    return solve_problem(_problem(doc), workers=1, seed=0, time_limit=30)


def test_the_optimizer_keeps_pipelines_off_a_slow_uplink() -> None:
    """Over the 100 Mb/s, 10 ms VPN no pipeline spans the two sites, and a faster VPN never
    serves less (the optimum may or may not cross it: with four RTX 5060 Ti in the lab, a lab
    pipeline alone beat every cross-site one at the calibration of 2026-11-29)."""
    slow = _solve(_doc())
    doc = _doc()
    doc["links"][2].update(bandwidth_gbit_s=10, latency_ms=0.1)
    fast = _solve(doc)
    hops = [[s.hop_route or "" for s in w.stages] for w in slow.workloads]
    assert not any("vpn" in h for hs in hops for h in hs), hops
    assert "vpn" not in slow.links
    assert slow.objective is not None and fast.objective is not None
    assert fast.objective >= slow.objective * (1 - 1e-9)


def test_cards_that_only_serve_across_the_uplink_pay_its_speed() -> None:
    """Two RTX 5060 Ti 16GB cannot hold Llama 3.1 70B in Q4_K_M (about 42 GB) alone: they serve
    only in a pipeline with the home machines, across the VPN, whose speed then sets what that
    replica makes (measured at 2026-11-29: 34.4 tokens/s over 100 Mb/s, 46.2 over 10 Gb/s)."""

    def doc(gbit: float, ms: float) -> dict[str, Any]:
        d = _doc()
        d["constraints"]["inventory"][3]["count"] = 2
        d["workloads"][0]["concurrency"] = 8
        d["links"][2].update(bandwidth_gbit_s=gbit, latency_ms=ms)
        return d

    slow, fast = _solve(doc(0.1, 10)), _solve(doc(10, 0.1))

    def crossing(plan: Any) -> list[Any]:
        return [w for w in plan.workloads if any("vpn" in (s.hop_route or "") for s in w.stages)]

    assert crossing(slow) and crossing(fast)
    assert slow.objective is not None and fast.objective is not None
    assert fast.objective > slow.objective
    assert sum(w.tokens_per_s for w in crossing(fast)) > sum(w.tokens_per_s for w in crossing(slow))


def _plan_doc() -> tuple[dict[str, Any], Any]:
    cat, problem = load_catalog(), load_problem(POOL)
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    return json.loads(dumps_plan(plan_document(plan, problem, cat))), cat


def test_the_plan_shows_each_split_and_the_verifier_recomputes_it() -> None:
    doc, cat = _plan_doc()
    assert plan_failures(plan_from_data(copy.deepcopy(doc), "p"), cat) == []
    w = next(i for i, x in enumerate(doc["workloads"]) if "rx-7900-xtx" in str(x["stages"]))
    st = doc["workloads"][w]["stages"][0]
    batch = doc["workloads"][w]["batch"]
    assert st["hop_route"] == "wifi-6 > home-lan"
    assert st["hop_bytes_per_token"] == HIDDEN * 2
    assert math.isclose(st["hop_seconds"], 2.5e-3 + HIDDEN * 2 * batch / 62.5e6, rel_tol=1e-9)
    # Batch 4, 512-token prompts, 256 out: a chunk takes the room, 256 tokens (serving.chunk_mix),
    # so (4 + 256) x 8,192 x 2 = 4,259,840 bytes cross, 2.5 ms + 4,259,840 / 62.5e6 s = 70.66 ms.
    assert batch == 4
    assert st["hop_chunk_bytes"] == (batch + 256) * HIDDEN * 2 == 4_259_840
    assert math.isclose(st["hop_chunk_seconds"], 2.5e-3 + 4_259_840 / 62.5e6, rel_tol=1e-9)
    last = doc["workloads"][w]["stages"][-1]  # back to the desktop: the sampled ids, 8 bytes each
    assert last["hop_bytes_per_token"] == 8
    assert last["hop_chunk_bytes"] == (batch + 256 / 512) * 8 == 36
    at = f"workloads.{w}.stages.0"
    end = f"workloads.{w}.stages.{len(doc['workloads'][w]['stages']) - 1}"
    for j, key, value, words in (
        (0, "hop_route", "home-lan", f"`{at}.hop_route`"),  # claims the faster wired link
        (0, "hop_bytes_per_token", HIDDEN, f"`{at}.hop_bytes_per_token`"),  # half the bytes
        (0, "hop_seconds", st["hop_seconds"] / 2, f"`{at}.hop_seconds`"),
        # The chunk's prompt tokens left out: only the decodes' hidden states, in their time.
        (0, "hop_chunk_bytes", batch * HIDDEN * 2, f"`{at}.hop_chunk_bytes`"),
        (0, "hop_chunk_seconds", st["hop_seconds"], f"`{at}.hop_chunk_seconds`"),
        (-1, "hop_chunk_bytes", batch * 8, f"`{end}.hop_chunk_bytes`"),  # no finished prompt
    ):
        bad = copy.deepcopy(doc)
        bad["workloads"][w]["stages"][j][key] = value
        found = plan_failures(plan_from_data(bad, "p"), cat)
        assert any(words in f for f in found), (key, found)
    # A single-stage replica has no hop: a split figure written into it is named by its key.
    one = next(i for i, x in enumerate(doc["workloads"]) if len(x["stages"]) == 1)
    for key, value in (("hop_seconds", 5.0), ("hop_chunk_bytes", 64.0), ("hop_route", "vpn")):
        bad = copy.deepcopy(doc)
        bad["workloads"][one]["stages"][0][key] = value
        found = plan_failures(plan_from_data(bad, "p"), cat)
        words = f"`workloads.{one}.stages.0.{key}`: `{value}`, but the replica has no hop"
        assert any(words in f for f in found), (key, found)
    bad = copy.deepcopy(doc)
    bad["links"] = [x for x in bad["links"] if x != "wifi-6"]
    found = plan_failures(plan_from_data(bad, "p"), cat)
    assert any("`links`" in f for f in found), found


@pytest.mark.parametrize(
    ("edit", "where", "words"),
    [
        (
            lambda d: d["machines"][3].update(segment="labb"),
            "machines[3].segment",
            "unknown segment `labb` (segments: home, lab)",
        ),
        (
            lambda d: d["links"][2].update(between=["home", "office"]),
            "links[2].between",
            "`office`, which is no machine or segment",
        ),
        (
            lambda d: d["links"][3].update(between=["mac-mini", "mac-mini"]),
            "links[3].between",
            "between `mac-mini` and itself",
        ),
        (
            lambda d: d["links"][3].update(between=["mac-studio", "lab"]),
            "links[3].between",
            "between a machine and a segment",
        ),
        (
            lambda d: d["links"].append({**d["links"][2], "id": "vpn2"}),
            "links[4].between",
            "`vpn2` and `vpn` are both between `home` and `lab`",
        ),
        (
            lambda d: d["segments"][1].update(id="lab-pc"),
            "segments[1].id",
            "names a segment and a machine",
        ),
        (
            lambda d: d["constraints"].update(network="vpn"),
            "constraints.network",
            "`vpn` is stated `between` `home` and `lab` and joins only those",
        ),
        (
            lambda d: d["machines"][2].update(attach="wifi6"),
            "machines[2].attach",
            "`wifi6` is no link between machines; did you mean `wifi-6`?",
        ),
        (
            lambda d: d["machines"][2].update(attach="pcie4"),
            "machines[2].attach",
            "`pcie4` is no link between machines",
        ),
        (
            lambda d: d["segments"][0].update(link="home-lann"),
            "segments[0].link",
            "`home-lann` is no link between machines",
        ),
        (
            lambda d: d["segments"][0].update(link="vpn"),
            "segments[0].link",
            "joins only those",
        ),
        (
            lambda d: d["machines"][2].update(attach="nvlink5"),
            "machines[2].attach",
            "`nvlink5` is a device fabric that rx-7900-xtx does not carry",
        ),
        (
            lambda d: d["segments"][1].update(link="nvlink5"),
            "segments[1].link",
            "`nvlink5` is a device fabric that rtx-5060-ti-16gb does not carry",
        ),
        (
            lambda d: d["links"][2].update(between=["home"]),
            "links[2].between",
            "needs at least 2 items",
        ),
        (
            lambda d: d["segments"].append({"id": "home", "link": "lab-lan"}),
            "segments[2].id",
            "two segments are named `home`",
        ),
    ],
)
def test_bad_networks_are_named(edit: Any, where: str, words: str, tmp_path: Path) -> None:
    """Each error names the file, the place and what to do."""
    doc = _doc()
    edit(doc)
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InputError) as e:
        load_problem(path)
    msg = str(e.value)
    assert "pool.yaml" in msg and where in msg and words in msg, msg


def _drop_split_fields(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    for w in out["workloads"]:
        for st in w["stages"]:
            for key in ("hop_route", "hop_bytes_per_token", "hop_seconds"):
                st.pop(key, None)
    return out


def test_a_plan_without_split_lines_passes_only_on_one_network() -> None:
    """A plan written before split lines were recorded passes where every hop crossed
    constraints.network (what such plans meant); where the problem routes a hop otherwise,
    the missing lines are named."""
    cat = load_catalog()
    problem = load_problem(PROBLEMS / "compute-owners-pool.yaml")
    plan = solve_problem(problem, workers=1, seed=0, time_limit=30)
    assert any(len(w.stages) > 1 for w in plan.workloads)
    old = _drop_split_fields(json.loads(dumps_plan(plan_document(plan, problem, cat))))
    assert plan_failures(plan_from_data(old, "p"), cat) == []
    doc, cat = _plan_doc()
    found = plan_failures(plan_from_data(_drop_split_fields(doc), "p"), cat)
    assert any("hop_route`: `None`" in f for f in found), found


def test_the_example_optimum_is_the_exhaustive_optimum() -> None:
    """The example's 8 machines: the proved optimum equals the best multiset of unpruned
    replica designs (tests/test_pool_optimality.py's search), routes and all."""
    from test_pool_optimality import _assert_solver_meets_exhaustive

    _assert_solver_meets_exhaustive(load_problem(POOL), "home-and-lab-pool")
