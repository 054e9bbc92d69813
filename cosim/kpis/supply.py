"""Supply: how long grid elements and buses were de-energised, and the energy the grid did not carry.

A grid element (role ``grid_element``: a Load, Sgen or Storage of the grid adapter) reports ``p_mw``
(what it asked for) and ``p_served_mw`` (what the grid served it, same sign): 0 with NaN voltages on a
de-energised bus (a line or switch opened cut it from every source), NaN when the step's power flow
did not solve. A Grid reports ``n_buses_unsupplied`` (buses the network supplies as given that have no
voltage in this step). Per element, this block gives:

* ``deenergised_s`` = dt · #steps with ``p_served_mw`` = 0 and no voltage on any of its phases;
* ``unserved_mwh`` = Σ max(|p_mw| − |p_served_mw|, 0) · dt: the energy it asked for that the grid did not
  carry (all of it while de-energised; on the OpenDSS engine also what a load below its ``vmin_pu``
  was not served as an impedance); a generator's is output that had nowhere to go.

and per grid ``deenergised_s`` (dt · #steps with ``n_buses_unsupplied`` > 0) and
``n_buses_unsupplied_max``.

A step that did not solve says nothing about supply: when a run has any, the totals are null (never
a partial sum read as the whole), ``n_unsolved_steps`` counts them and ``over_solved_steps`` gives the
totals over the solved steps alone. Any de-energised time makes the run ``degraded`` and puts a
warning in ``metadata.json`` (:func:`degraded_notes`, :func:`run_warnings`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, finite
from cosim.roles import RunRoles

#: What an element reports that the block reads.
ELEMENT_ATTRS = ("p_mw", "p_served_mw", "vm_phase_max_pu")
#: What a grid reports that the block reads.
GRID_ATTR = "n_buses_unsupplied"


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    wanted = [f"{e}.{a}" for e in roles.entities_with("grid_element") for a in ELEMENT_ATTRS]
    wanted += [f"{g}.{GRID_ATTR}" for g in roles.entities_with("grid")]
    return [c for c in wanted if c in names]


def element_supply(p_mw: np.ndarray, served_mw: np.ndarray, vm_max_pu: np.ndarray, dt_s: float) -> dict[str, Any]:
    """``deenergised_s`` and ``unserved_mwh`` of one element over its steps (module docstring). [s, MWh]"""
    asked, served, vm = (np.asarray(a, dtype=float) for a in (p_mw, served_mw, vm_max_pu))
    unsolved = ~np.isfinite(served) & np.isfinite(asked)
    solved = np.isfinite(served) & np.isfinite(asked)
    dead = solved & (served == 0.0) & ~np.isfinite(vm)
    short = np.clip(np.abs(asked[solved]) - np.abs(served[solved]), 0.0, None)
    totals = {"deenergised_s": finite(float(dead.sum()) * dt_s),
              "unserved_mwh": finite(float(short.sum()) * dt_s / 3600.0)}
    n_unsolved = int(unsolved.sum())
    if not n_unsolved:
        return totals
    return {**dict.fromkeys(totals), "n_unsolved_steps": n_unsolved, "over_solved_steps": totals}


def _compute(inp: KpiInput) -> dict[str, Any]:
    dt_s = inp.dt_h * 3600.0
    out: dict[str, Any] = {}
    for eid in inp.roles.entities_with("grid_element"):
        cols = [inp.col(eid, a) for a in ELEMENT_ATTRS]
        if all(cols):
            out[eid] = element_supply(*(inp.ts[c].to_numpy(dtype=float) for c in cols), dt_s)
    for grid in inp.roles.entities_with("grid"):
        col = inp.col(grid, GRID_ATTR)
        if col:
            n = inp.ts[col].to_numpy(dtype=float)
            known = np.isfinite(n)
            out[grid] = {"deenergised_s": finite(float((n[known] > 0).sum()) * dt_s),
                         "n_buses_unsupplied_max": int(n[known].max()) if known.any() else None}
            if (~known).any():
                out[grid]["n_unsolved_steps"] = int((~known).sum())
    return {"supply": out} if out else {}


def _deenergised_s(entry: dict[str, Any]) -> float:
    solved = entry.get("over_solved_steps") or {}
    return float(entry.get("deenergised_s") or solved.get("deenergised_s") or 0.0)


def degraded_notes(kpis: dict[str, Any]) -> list[str]:
    """Why a run is ``degraded`` for its supply: every element and grid with de-energised time."""
    notes = []
    for eid, entry in (kpis.get("supply") or {}).items():
        seconds = _deenergised_s(entry)
        if seconds <= 0:
            continue
        if "n_buses_unsupplied_max" in entry:
            notes.append(f"grid {eid!r} had buses without voltage for {seconds:g} s (up to "
                         f"{entry['n_buses_unsupplied_max']}): a line or switch cut them from every source; their "
                         "voltages there are NaN and their loads were not served")
            continue
        unserved = entry.get("unserved_mwh")
        if unserved is None:
            unserved = (entry.get("over_solved_steps") or {}).get("unserved_mwh")
        what = "" if unserved is None else f", {unserved:.4g} MWh it asked for not carried"
        notes.append(f"{eid} was de-energised for {seconds:g} s{what}: its bus had no path to a source; its "
                     "voltages there are NaN and its p_served_mw 0")
    return notes


def run_warnings(kpis: dict[str, Any]) -> list[str]:
    """The block's texts for ``metadata.json`` "warnings"."""
    return [f"after the run: {note}; see kpis.json 'supply'" for note in degraded_notes(kpis)]


BLOCK = Block("supply", "Supply (de-energised time, energy not served)", 95, _columns, _compute,
              headline=("deenergised_s", "unserved_mwh"))
