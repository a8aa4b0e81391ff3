"""Checks of a problem's networks against the catalog: `constraints.network`, the stated
`links`, the machines' own links (`link`, `network`, `attach`) and the segments' links, each
with a located error naming the fix (planner.load.check_names calls them)."""

from __future__ import annotations

from collections.abc import Callable

from planner.catalog import Catalog
from planner.errors import InputError, did_you_mean
from planner.estimator.built_in_link import NoSharedPort, assumed_network
from planner.schema.problem import Problem
from planner.schema.yaml_io import Loc


def check_network(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """constraints.network names a link between hosts: one the problem states under `links`
    (whose ids must not be catalog links'), else a catalog link of inter-node scope."""
    c = problem.constraints
    stated = {s.id for s in problem.links}
    for i, s in enumerate(problem.links):
        if s.id in cat.links:
            raise InputError(
                f"{where(('links', i, 'id'))}`{s.id}` is a catalog link; give the stated link "
                f"another name, or name the catalog's `{s.id}` in constraints.network and drop "
                "this entry"
            )
    if c.network in stated:
        pass  # a link the problem states by its figures: always between hosts
    elif c.network not in cat.links:
        names = [*stated, *cat.links]
        raise InputError(
            f"{where(('constraints', 'network'))}unknown link `{c.network}`"
            f"{did_you_mean(c.network, names)} (links: {', '.join(names)}; or state one "
            "under `links` with its bandwidth_gbit_s and latency_ms)"
        )
    elif cat.links[c.network].scope == "intra-node":
        between = sorted(k for k, v in cat.links.items() if v.scope != "intra-node")
        raise InputError(
            f"{where(('constraints', 'network'))}`{c.network}` is a link inside one server "
            f"(scope intra-node); the network between hosts must be an inter-node link: "
            f"{', '.join(between)}"
        )
    used = {c.network, *(mc.network for mc in problem.machines)}
    used |= {mc.attach for mc in problem.machines} | {g.link for g in problem.segments}
    used |= {s.id for s in problem.links if s.between is not None}
    if problem.links and "network" not in c.model_fields_set and not used & stated:
        s0 = problem.links[0]
        raise InputError(
            f"{where(('links', 0, 'id'))}`{s0.id}` is stated but nothing uses it: the network "
            f"between hosts would be the default (`{c.network}`, or for a pool of whole "
            "machines the slowest built-in port they share); set "
            f"`constraints.network: {s0.id}` (or name it in a machine's `network`), or drop the "
            "entry"
        )


def check_machines(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """A stated machine is named apart from the catalog's nodes, joins its devices over a link
    inside one machine, and its own network (if any) is a link between machines."""
    for j, mc in enumerate(problem.machines):
        if mc.id in cat.nodes:
            raise InputError(
                f"{where(('machines', j, 'id'))}`{mc.id}` is a catalog node; give the stated "
                f"machine another name (or drop it: inventory devices without a `machine` sit in "
                "the catalog's host)"
            )
        for key in ("network", "attach"):
            _check_between_machines(problem, cat, getattr(mc, key), where(("machines", j, key)))
        inside = sorted(k for k, v in cat.links.items() if v.scope != "inter-node")
        if mc.link not in cat.links:
            raise InputError(
                f"{where(('machines', j, 'link'))}unknown link `{mc.link}`"
                f"{did_you_mean(mc.link, inside)} (a catalog link between the machine's "
                f"devices: {', '.join(inside)})"
            )
        if cat.links[mc.link].scope == "inter-node":
            raise InputError(
                f"{where(('machines', j, 'link'))}`{mc.link}` is a network between machines; "
                f"the link between one machine's devices is one of {', '.join(inside)} (the "
                "network between machines is constraints.network)"
            )


def check_segments(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> None:
    """A segment's link joins machines; a link stated `between` two machine kinds or two
    segments joins only those, so nothing else names it as its network."""
    for i, g in enumerate(problem.segments):
        _check_between_machines(problem, cat, g.link, where(("segments", i, "link")))
    names: list[tuple[str | None, Loc]] = [
        (problem.constraints.network, ("constraints", "network"))
    ]
    for j, mc in enumerate(problem.machines):
        names += [(mc.network, ("machines", j, "network")), (mc.attach, ("machines", j, "attach"))]
    names += [(g.link, ("segments", i, "link")) for i, g in enumerate(problem.segments)]
    for s in problem.links:
        if s.between is None:
            continue
        for name, at in names:
            if name == s.id:
                a, b = s.between
                raise InputError(
                    f"{where(at)}`{s.id}` is stated `between` `{a}` and `{b}` and joins only "
                    "those; a network of every machine, a segment or a machine kind's own is "
                    "another link: state one under `links` without `between`"
                )


def _check_between_machines(problem: Problem, cat: Catalog, name: str | None, at: str) -> None:
    """`name` (if any) is a link between machines: one stated under `links`, or a catalog link
    that is not only inside one server; `at`: where the problem names it."""
    stated = {x.id for x in problem.links}
    if name is None or name in stated:
        return
    if name in cat.links and cat.links[name].scope != "intra-node":
        return
    between = [*sorted(stated), *(k for k, v in cat.links.items() if v.scope != "intra-node")]
    raise InputError(
        f"{at}`{name}` is no link between machines{did_you_mean(name, between)} (links between "
        f"machines: {', '.join(between)}; or state one under `links`)"
    )


def assume_network(problem: Problem, cat: Catalog, where: Callable[[Loc], str]) -> Problem:
    """A problem naming no network whose devices are all whole machines gets the slowest
    built-in port they share as constraints.network (planner.estimator.built_in_link; the
    plan notes the assumption), or an error naming the fix where none can be inferred. The
    value stays unset as far as the problem file goes (it was not stated)."""
    try:
        assumed = assumed_network(problem, cat)
    except NoSharedPort as e:
        raise InputError(
            f"{where(('constraints',))}no network is named and {e}: name the link the machines "
            "are joined by in constraints.network (a catalog link such as eth-1g or "
            "thunderbolt5, `planner catalog list links`, or one stated under `links` with its "
            "bandwidth_gbit_s and latency_ms)"
        ) from None
    if assumed is None:
        return problem
    c = problem.constraints.model_copy(update={"network": assumed.link.id})
    c.__pydantic_fields_set__.discard("network")
    return problem.model_copy(update={"constraints": c})
