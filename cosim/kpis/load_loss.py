"""Load loss: facilities that put load on backup (adapters/ride_through.py) and what it did.

Per entity that records ``in_service`` and ``p_lost_mw``: ``n_trips`` (the UPS transfer logic's
trips plus PERC1's frequency trip, ``n_perc1_trips``, where recorded). Once any load was on
backup, by a trip or by a share PERC1 ceased (``p_lost_mw`` > 0 with ``in_service`` staying 1;
also a native PERC1 inside the grid model fed back through ``p_grid_connected_frac``):
``lost_max_mw``, ``backup_s`` (time with load on backup), ``returned`` (all of the load back on the
grid at the end), ``ups_mwh``, ``genset_mwh``, ``unserved_mwh`` and ``recharge_mwh`` (the grid's
energy into the UPS after the return) (Σ p·Δt). Once it tripped (a transfer, ``in_service`` 0, or
PERC1's frequency trip): ``first_trip_s`` (from the start) and ``lost_mw`` (demand off the grid
then); with a grid that records ``vm_max_pu`` (or bus ``*_vm_pu`` columns),
``vm_before_max_pu`` / ``vm_after_max_pu``: the highest voltage before and after the first trip
(the over-voltage a load loss leaves).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, energy_mwh, ending, finite, last_value
from cosim.roles import RunRoles

ATTRS = ("in_service", "p_lost_mw", "n_trips", "n_perc1_trips", "t_backup_s", "p_ups_mw", "p_genset_mw",
         "p_unserved_mw", "p_recharge_mw")


def _sites(columns) -> list[str]:
    names = set(columns)
    return [c.rpartition(".")[0] for c in ending(columns, ".in_service") if f"{c.rpartition('.')[0]}.p_lost_mw" in names]


def _voltage_columns(columns, roles: RunRoles) -> list[str]:
    grids = set(roles.entities_with("grid"))
    return [c for c in ending(columns, "vm_max_pu", "_vm_pu") if c.partition(".")[0] in grids]


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    wanted = [f"{s}.{a}" for s in _sites(columns) for a in ATTRS if f"{s}.{a}" in names]
    return wanted + (_voltage_columns(columns, roles) if wanted else [])


def site_kpis(inp: KpiInput, site: str) -> dict[str, Any]:
    ts = inp.ts
    on = ts[f"{site}.in_service"].astype(float).to_numpy() > 0.5
    lost_raw = ts[f"{site}.p_lost_mw"].to_numpy(float)  # NaN: no reading (reported as unknown, not as 0 MW)
    lost = np.nan_to_num(lost_raw)
    tripped = ~on  # a transfer; PERC1's frequency trip leaves in_service at 1
    trips = (int(last_value(ts[f"{site}.n_trips"]) or 0) if inp.col(site, "n_trips") else
             int(np.sum(np.diff(on.astype(int)) == -1) + (not on[0])))
    if inp.col(site, "n_perc1_trips"):
        perc1 = np.nan_to_num(ts[f"{site}.n_perc1_trips"].to_numpy(float)) > 0.5
        tripped |= perc1
        trips += int(perc1[-1])
    out: dict[str, Any] = {"n_trips": trips}
    backup = tripped | (lost > 0)  # also a share PERC1 ceased (ours, or a native one's fed back)
    if not backup.any():
        return out
    known = np.isfinite(lost_raw)
    out.update({"lost_max_mw": finite(np.max(lost_raw[known])) if known.any() else None,
                "backup_s": finite(last_value(ts[f"{site}.t_backup_s"])) if inp.col(site, "t_backup_s") else
                finite(int(backup.sum()) * inp.dt_h * 3600.0), "returned": bool(on[-1] and not lost_raw[-1] > 0) if known[-1] else None})
    for attr, key in (("p_ups_mw", "ups_mwh"), ("p_genset_mw", "genset_mwh"), ("p_unserved_mw", "unserved_mwh"),
                      ("p_recharge_mw", "recharge_mwh")):
        if inp.col(site, attr):
            out[key] = finite(energy_mwh(ts[f"{site}.{attr}"], inp.dt_h))
    if not tripped.any():
        return out
    first = int(np.flatnonzero(tripped)[0])
    out.update({"first_trip_s": finite((ts.index[first] - ts.index[0]).total_seconds()),
                "lost_mw": finite(lost_raw[first])})
    volts = _voltage_columns(ts.columns, inp.roles)
    if volts and first > 0:
        v = ts[volts].to_numpy(float)
        out["vm_before_max_pu"] = finite(np.nanmax(v[:first]))
        out["vm_after_max_pu"] = finite(np.nanmax(v[first:]))
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    found = {site: site_kpis(inp, site) for site in _sites(inp.ts.columns)}
    return {"load_loss": found} if found else {}


BLOCK = Block("load_loss", "Load loss (ride-through)", 85, _columns, _compute,
              headline=("lost_mw", "backup_s", "first_trip_s", "vm_after_max_pu"))
