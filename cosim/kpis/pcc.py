"""Voltage at the points of connection: one entry per grid element that an IT load feeds.

A point of connection (PCC) is a grid element (role ``grid_element``: a Load, Sgen or Storage
of the grid adapter) that an entity of role ``it`` feeds through a connection (a datacenter's
``p_mw`` into its Load). Each reports, over the phases it connects to (``vm_phase_min_pu``,
``vm_phase_max_pu``, ``vm_violation_pu``: see the grid adapter), and this block integrates:

* ``violation_s`` = dt · #steps with some phase strictly outside the grid's band;
* ``violation_pu_s`` = Σ_t Σ_phases [max(v_low − v, 0) + max(v − v_high, 0)] · dt;
* ``undervoltage_s`` / ``overvoltage_s`` = dt · #steps with the lowest phase below 0.95 pu /
  the highest above 1.05 pu; ``vm_min_pu``, ``vm_max_pu`` over the run.

Steps where a grid's power flow did not converge say nothing about the voltages: when the run
has any, the entries are null and ``n_nonconverged_steps`` counts them (as the grid block does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput
from cosim.kpis.grid import band_kpis, voltage_band
from cosim.roles import RunRoles

#: What a point of connection reports, in the order band_kpis takes it.
PCC_ATTRS = ("vm_phase_min_pu", "vm_phase_max_pu", "vm_violation_pu")


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    wanted = [f"{e}.{a}" for e in roles.entities_with("grid_element") for a in PCC_ATTRS]
    wanted += [f"{g}.converged" for g in roles.entities_with("grid")]
    return [c for c in wanted if c in names]


def points_of_connection(inp: KpiInput) -> list[str]:
    """Grid elements fed by an IT entity that recorded their phase voltages, in declaration order."""
    fed = {dst for src, dsts in inp.links.items() if inp.roles.of(src) == "it" for dst in dsts}
    return [e for e in inp.roles.entities_with("grid_element")
            if e in fed and all(inp.col(e, a) for a in PCC_ATTRS)]


def _compute(inp: KpiInput) -> dict[str, Any]:
    elements = points_of_connection(inp)
    if not elements:
        return {}
    flags = [c for c in (inp.col(g, "converged") for g in inp.roles.entities_with("grid")) if c]
    failed = np.zeros(len(inp.ts), bool)
    for flag in flags:
        failed |= inp.ts[flag].to_numpy(float) < 0.5
    dt_s = inp.dt_h * 3600.0
    out: dict[str, Any] = {}
    for element in elements:
        low, high, viol = (inp.ts[f"{element}.{a}"] for a in PCC_ATTRS)
        entry = band_kpis(low, high, viol, dt_s, *voltage_band(inp, element))
        if failed.any():
            entry = {**dict.fromkeys(entry), "n_nonconverged_steps": int(failed.sum())}
        out[element] = entry
    return {"points_of_connection": out}


BLOCK = Block("points_of_connection", "Points of connection", 21, _columns, _compute,
              headline=("violation_s", "violation_pu_s", "vm_min_pu"))
