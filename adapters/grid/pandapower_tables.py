"""What the grid adapter reads of a pandapower net's tables (element ids, names, sources, supplied
buses) and the names of its elements and outputs, without importing pandapower itself: validating
and running an OpenDSS scenario loads neither pandapower nor lightsim2grid."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from cosim.sdk import sanitise  # the one id rule of every grid engine

__all__ = ["ELEMENT_ATTRS", "ELEMENT_VOLTAGE_OUTPUTS", "GRID_OUTPUTS", "INJECTION_SIGN", "KINDS", "MAX_ITERATION",
           "MODEL_KIND", "SERVED_ATTR", "TOLERANCE_MVA", "element_ids", "locate_in", "sanitise", "slack_problems",
           "unsupplied_bus_problem", "unsupplied_buses"]

KINDS = ("load", "sgen", "storage")
#: Sign turning a table's p_mw into a bus injection (consumer convention for load, storage).
INJECTION_SIGN = {"load": -1.0, "sgen": 1.0, "storage": -1.0}
MODEL_KIND = {"Load": "load", "Sgen": "sgen", "Storage": "storage"}
GRID_OUTPUTS = (
    "vm_min_pu", "vm_max_pu", "p_import_mw", "q_import_mvar", "losses_mw", "max_loading_pct",
    "converged", "n_nonconverged", "n_buses_unsupplied",
    "allbus_vm_min_pu", "allbus_vm_max_pu", "allbus_violation_pu", "n_allbus_violating",
)
ELEMENT_ATTRS = ("p_mw", "q_mvar")
#: What an element reports besides its powers: mean, lowest and highest voltage over its phases and
#: the sum over its phases of the distance outside the band. [pu]
ELEMENT_VOLTAGE_OUTPUTS = ("vm_pu", "vm_phase_min_pu", "vm_phase_max_pu", "vm_violation_pu")
#: Output of every grid element: the active power the grid served it in the element's own sign (its
#: ``p_mw`` output is what it asked for): 0 on a de-energised bus, NaN when the step did not solve. [MW]
SERVED_ATTR = "p_served_mw"
#: pandapower's ``runpp`` defaults, kept so results agree with it.
MAX_ITERATION = 10
TOLERANCE_MVA = 1e-8


def element_ids(table) -> list[str]:
    """Unique attribute ids of a pandapower table's rows: sanitised names, else the index."""
    names = [sanitise(n) for n in table["name"]] if "name" in table else [""] * len(table)
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    ids = [n if n and counts[n] == 1 else "" for n in names]
    taken = set(ids)
    for pos, idx in enumerate(table.index):
        if not ids[pos]:
            ids[pos] = str(idx) if str(idx) not in taken else f"i{idx}"
            taken.add(ids[pos])
    return ids


def locate_in(net, table: str, ref: str | int, ids: list[str] | None = None) -> int:
    """Position of element ``ref`` (name, sanitised id or index) in ``net[table]``."""
    df = net[table]
    text = str(ref).strip()
    names = df["name"].astype(str).tolist() if "name" in df else []
    if text in names:
        return names.index(text)
    ids = ids or element_ids(df)
    if text in ids:
        return ids.index(text)
    if re.fullmatch(r"-?\d+", text) and int(text) in df.index:
        return int(df.index.get_loc(int(text)))
    sample = ", ".join(names[:6] if any(n not in ("None", "nan") for n in names) else map(str, df.index[:6]))
    raise ValueError(f"unknown {table} {ref!r} in this network ({len(df)} in net.{table}, e.g. {sample}); "
                     f"give a {table} name or index")


def slack_problems(net, network: str) -> list[str]:
    """A problem when ``net`` has no in-service ``ext_grid`` nor slack ``gen``: pandapower then has no
    reference bus and no step can be solved."""
    ext_grid = net.ext_grid[net.ext_grid.in_service.astype(bool)] if len(net.ext_grid) else net.ext_grid
    gen = net.gen
    slack_gen = gen[gen.in_service.astype(bool) & gen.slack.astype(bool)] if len(gen) and "slack" in gen else gen.iloc[:0]
    if len(ext_grid) or len(slack_gen):
        return []
    state = "none in service" if len(net.ext_grid) else "net.ext_grid is empty"
    return [f"network {Path(network).name!r} has no source to solve from (no ext_grid or slack gen; {state}): "
            "add one at the substation bus (pandapower.create_ext_grid(net, bus)) or set net.ext_grid.in_service "
            "to true, and save the net again"]


def unsupplied_bus_problem(net, bus_pos: int, ref: str | int, unsupplied: Any = None) -> str | None:
    """Why the bus at position ``bus_pos`` cannot serve an element (out of service, or no path of
    in-service lines, transformers and closed switches to a source), or None when it can: an element
    there would report its power while the grid carries none of it. ``unsupplied``: the net's
    :func:`unsupplied_buses`, when the caller has them already (several elements of one net)."""
    bus = net.bus.index[bus_pos]
    if "in_service" in net.bus and not bool(net.bus.in_service.iloc[bus_pos]):
        return f"bus {ref!r} is out of service (net.bus.in_service is false): put it in service, or pick another bus"
    if unsupplied is None:
        unsupplied = unsupplied_buses(net)
    if bus not in unsupplied:
        return None
    return (f"bus {ref!r} has no path to a source (ext_grid or slack gen) through in-service lines, transformers "
            "and closed switches, so an element there would draw nothing from the grid while it reports its "
            "power: pick a connected bus, or put the lines to it in service (net.line.in_service)")


def unsupplied_buses(net) -> set:
    """Indexes of ``net``'s buses with no path of in-service lines, transformers and closed switches
    to a source (pandapower's topology search; reads ``net`` only)."""
    from pandapower import topology  # ~1-3 s to import pandapower: only for its engine, not for OpenDSS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return topology.unsupplied_buses(net)
