"""What the grid adapter finds in the network before a run starts: lines with placeholder or default
ratings (warnings), and line trips, buses and loads the network does not have (problems), every one
at once."""

from __future__ import annotations

import inspect
from typing import Any

import pandas as pd

from cosim import grid_models
from cosim.adapters.grid.backend import opendss_circuit_info
from cosim.adapters.grid.opendss_faults import fault_problems
from cosim.adapters.grid.opendss_flow import sanitise as dss_sanitise, unknown_bus_message
from cosim.adapters.grid.pandapower_tables import (
    MODEL_KIND,
    element_ids,
    locate_in,
    slack_problems,
    unsupplied_bus_problem,
    unsupplied_buses,
)
from cosim.adapters.grid.params import ElementParams, SimParams
from cosim.sdk import ScenarioContext

__all__ = ["PLACEHOLDER_MAX_I_KA", "default_rating_warnings", "opendss_entity_problems",
           "pandapower_entity_problems", "placeholder_rating_warnings", "sim_problems", "unknown_trip_lines"]


#: A line rating at or above this is a placeholder, not a conductor (the largest overhead
#: transmission bundles carry ~5-10 kA). [kA]
PLACEHOLDER_MAX_I_KA = 100.0


def sim_problems(sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
    """Every problem of the sim's keys against its network, and the warnings on its ratings: all
    groups at once, so that a user mends them in one go (each group reads the network on its own)."""
    if sim_params.engine == "opendss":
        info = opendss_circuit_info(grid_models.dss_file(sim_params.network))
        found = [*_tap_problems(sim_params, info.regs),
                 *fault_problems(list(sim_params.faults), info.buses, info.bus_phases, ctx.step_s)]
        known = list(info.buses)
        ratings = default_rating_warnings(info, sim_params.network)
    else:
        net = grid_models.load_network(sim_params.network, copy=False, **sim_params.network_params)
        found = slack_problems(net, sim_params.network)
        known = [str(n) for n in net.bus.name] if "name" in net.bus else []
        known += [str(i) for i in net.bus.index]
        ratings = placeholder_rating_warnings(net, sim_params.network)
    return [*found, *_unknown_excluded_buses(sim_params, known), *unknown_trip_lines(sim_params), *ratings]


def _tap_problems(sim_params: SimParams, regs: list[str]) -> list[str]:
    """``tap_positions`` naming a regulator the circuit lacks, or given without fixed regulators."""
    found = []
    unknown = [k for k in sim_params.tap_positions if k.lower() not in {r.lower() for r in regs}]
    if unknown:
        found.append(f"tap_positions: unknown regulator(s) {unknown}; this circuit's RegControls: "
                     f"{', '.join(regs) or 'none'}")
    if sim_params.tap_positions and sim_params.regulators != "fixed":
        found.append('tap_positions apply with regulators = "fixed"; set it, or drop tap_positions')
    return found


def _unknown_excluded_buses(sim_params: SimParams, known: list[str]) -> list[str]:
    """``exclude_buses`` naming buses the network lacks (by name, any case, or sanitised id)."""
    names, ids = {k.lower() for k in known}, {dss_sanitise(k) for k in known}
    unknown = [b for b in sim_params.exclude_buses or () if b.lower() not in names and dss_sanitise(b) not in ids]
    if not unknown:
        return []
    return [f"exclude_buses: unknown bus(es) {unknown} in {sim_params.network} (e.g. {', '.join(known[:8])})"]


def placeholder_rating_warnings(net: Any, network: str) -> list[str]:
    """Findings on the ratings of ``net``'s in-service lines: a warning when some carry placeholder
    ratings (``max_i_ka`` of 100 kA or more, e.g. pandapower's ``case33bw`` with 99999) or none
    (NaN: pandapower reports their loading as NaN, which no limit catches): their loading and
    overload KPIs and any thermal limit of a study (hosting capacity) never bind, which a planner
    must know; a problem when some are 0 or negative (every step would be an infinite overload)."""
    if "max_i_ka" not in net.line or not len(net.line):
        return []
    lines = net.line[net.line.in_service.astype(bool)] if "in_service" in net.line else net.line
    rating = pd.to_numeric(lines.max_i_ka, errors="coerce")
    found = []
    bad = lines[rating <= 0]
    if not bad.empty:
        found.append(f"{len(bad)} of {len(lines)} lines of {network} have a rating of {rating[bad.index].min():g} kA "
                     f"(max_i_ka <= 0: line {_line_names(bad)}): give their conductors' ratings in kA")
    fake = lines[rating >= PLACEHOLDER_MAX_I_KA]
    if not fake.empty:
        found.append(f"warning: {len(fake)} of {len(lines)} lines of {network} have placeholder ratings (max_i_ka = "
                     f"{rating[fake.index].max():g} kA, no conductor's): line loading and overload KPIs, and thermal "
                     f"limits in hosting capacity, never bind; give real ratings {_rating_param_hint(network)}in a "
                     "pandapower JSON copy of the network (net.line.max_i_ka) for a thermal study")
    missing = lines[rating.isna()]
    if not missing.empty:
        found.append(f"warning: {len(missing)} of {len(lines)} lines of {network} have no rating (max_i_ka missing: "
                     f"line {_line_names(missing)}): their loading is not computed, so overload KPIs and thermal "
                     f"limits in hosting capacity never see them; give their ratings in kA (net.line.max_i_ka)")
    return found


def _line_names(lines: Any) -> str:
    """Up to four of ``lines``' names (or indices), for a message."""
    names = [str(n) if isinstance(n, str) and n else str(i)
             for i, n in zip(lines.index, lines["name"] if "name" in lines else lines.index)]
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def default_rating_warnings(info: Any, network: str) -> list[str]:
    """A warning when lines of an OpenDSS circuit carry no rating of their file's (OpenDSS's
    default 400 A, or 0 A for a geometry whose wires have none: ``CircuitInfo.unrated_lines``),
    the OpenDSS engine's counterpart of :func:`placeholder_rating_warnings`."""
    unrated = list(info.unrated_lines)
    if not unrated:
        return []
    shown = ", ".join(unrated[:4]) + (", ..." if len(unrated) > 4 else "")
    return [f"warning: {len(unrated)} of {len(info.lines)} lines of {network} ({shown}) carry no "
            "ampacity of the file's (OpenDSS then rates them at its default 400 A, or 0 A for a geometry "
            "whose wires have none): their loading and overload KPIs, and thermal limits in hosting "
            "capacity, measure that default, not a conductor; add normamps = <A> to their LineCode, "
            "WireData or Line definitions from the conductor data"]


def _rating_param_hint(network: str) -> str:
    """``with network_params = {max_i_ka = ...} or `` where the catalogue network's build takes a rating."""
    try:
        build = grid_models._module(network).build
    except (ImportError, ValueError, AttributeError):
        return ""
    return "with network_params = {max_i_ka = <kA>} or " if "max_i_ka" in inspect.signature(build).parameters else ""


def unknown_trip_lines(sim_params: SimParams) -> list[str]:
    """The trips' lines that the network does not have, named with the key and examples."""
    refs = sorted({line for _, _, line in sim_params.all_line_trips()})
    if not refs:
        return []
    if sim_params.engine == "opendss":
        info = opendss_circuit_info(grid_models.dss_file(sim_params.network))
        names, ids = [n.lower() for n in info.lines], info.ids["line"]
        unknown = [r for r in refs if r.lower() not in names and dss_sanitise(r) not in ids]
        sample = info.lines[:6]
    else:
        net = grid_models.load_network(sim_params.network, copy=False, **sim_params.network_params)
        ids = element_ids(net.line)
        unknown = []
        for ref in refs:
            try:
                locate_in(net, "line", ref, ids)
            except ValueError:
                unknown.append(ref)
        sample = ids[:6]
    if not unknown:
        return []
    return [f"line_trips: unknown line(s) {unknown} in {sim_params.network}; give a line name or id "
            f"(e.g. {', '.join(sample)})"]


def opendss_entity_problems(model: str, params: ElementParams, sim_params: SimParams) -> list[str]:
    """An unknown bus or load, or phases the bus does not have, named before any simulator starts."""
    try:
        path = grid_models.dss_file(sim_params.network)
        info = opendss_circuit_info(path)
    except ValueError as exc:
        return [str(exc)]
    if params.element is not None:
        if model != "Load":
            return [f"element = {params.element!r}: the opendss engine drives existing loads only"]
        if not any(str(params.element).lower() in (n.lower(), dss_sanitise(n)) for n in info.loads):
            return [f"unknown load {params.element!r} in {path.name} (e.g. {', '.join(info.loads[:6])})"]
        return []
    ref = str(params.bus).strip()
    match = [i for i, b in enumerate(info.buses) if ref.lower() == b.lower() or ref == dss_sanitise(b)]
    if not match:
        return [unknown_bus_message(ref, info.buses, path.name)]
    have = info.bus_phases[match[0]]
    if set(params.phases) - set(have):
        return [f"bus {ref!r} has phases {have!r}, not {params.phases!r}; set phases to a subset of {have!r}"]
    if info.bus_kv_base and not info.bus_kv_base[match[0]] > 0:
        return [f"bus {ref!r} has no base voltage: add its kV to 'Set VoltageBases = [...]' (then "
                f"'CalcVoltageBases') in {path.name}"]
    if match[0] in info.isolated_buses:
        return [f"bus {ref!r} has no path to a source in {path.name} (OpenDSS solves it at 0 V), so an element "
                "there would draw nothing from the grid while it reports its power: pick a connected bus, or "
                "connect it (enable its lines, close its switches)"]
    return []


class _NetFacts:
    """What the entity checks read of one pandapower network, found once for all its elements: the
    shared read-only net, its missing source, its unsupplied buses and its tables' ids."""

    def __init__(self, net: Any, network: str) -> None:
        self.net = net
        self.slack_problems = slack_problems(net, network)
        self._unsupplied: set | None = None
        self._ids: dict[str, list[str]] = {}

    @property
    def unsupplied(self) -> set:
        if self._unsupplied is None:
            self._unsupplied = unsupplied_buses(self.net)
        return self._unsupplied

    def ids(self, table: str) -> list[str]:
        if table not in self._ids:
            self._ids[table] = element_ids(self.net[table])
        return self._ids[table]


#: The facts of the networks checked so far in this process, by network key (a JSON file's version
#: included, so an edited file is read again); at most this many are kept, oldest dropped first.
_FACTS: dict[tuple, _NetFacts] = {}
_FACTS_MAX = 8


def _net_facts(sim_params: SimParams) -> _NetFacts:
    key = (grid_models.network_key(sim_params.network, **sim_params.network_params), sim_params.network)
    if key not in _FACTS:
        net = grid_models.load_network(sim_params.network, copy=False, **sim_params.network_params)
        while len(_FACTS) >= _FACTS_MAX:
            _FACTS.pop(next(iter(_FACTS)))
        _FACTS[key] = _NetFacts(net, sim_params.network)
    return _FACTS[key]


def pandapower_entity_problems(model: str, params: ElementParams, sim_params: SimParams) -> list[str]:
    """An unknown bus or element, or a bus no source supplies, named before any simulator starts
    (a network without a source is said once, by the sim's own check)."""
    facts = _net_facts(sim_params)
    net = facts.net
    table, ref = ("bus", params.bus) if params.bus is not None else (MODEL_KIND[model], params.element)
    try:
        pos = locate_in(net, table, ref, facts.ids(table))
    except ValueError as exc:
        return [str(exc)]
    if table != "bus":
        ref = net[table].bus.iloc[pos]
        pos = int(net.bus.index.get_loc(ref))
    if facts.slack_problems:
        return []  # said once, for the sim
    problem = unsupplied_bus_problem(net, pos, params.bus if params.bus is not None else ref, facts.unsupplied)
    return [problem] if problem else []
