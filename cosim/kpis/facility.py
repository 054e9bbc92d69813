"""IT and cooling energy, PUE and WUE (The Green Grid; ISO/IEC 30134-2 and -9), from roles.

PUE = (IT + power-delivery losses + cooling electricity) / IT energy over the run, where IT
is each ``it`` entity's ``p_it_mw`` (servers; its ``p_loss_mw`` the UPS/PDU losses; a run
that did not record ``p_it_mw`` has no facility block); cooling electricity is the
``cooling`` entities' ``p_cooling_mw`` plus the ``air_handler`` entities' ``p_fans_mw``. WUE = site water [L] /
IT energy [kWh] (1 m³/MWh = 1 L/kWh) from the cooling entities' cumulative ``water_m3``
(its last value counts). ``unmet_cooling_mwh`` = Σ q_unmet_mw·Δt of the cooling entities;
``inlet_excursion_s`` = Δt · #steps with an air handler's rack inlet outside ASHRAE A1
(``dt_inlet_excursion_k`` > 0), the worst air handler.

With several IT entities (two halls compared in one run), ``facility_by_it`` gives the same
block per IT entity over the entities its power or heat reaches through the connections
(IT -> hall -> chiller plant), instead of one that adds both halls' cooling to one IT.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from cosim.kpis._block import Block, KpiInput, energy_mwh, finite
from cosim.roles import RunRoles

COOLING_ATTRS = ("p_cooling_mw", "water_m3", "q_unmet_mw")
AIR_ATTRS = ("p_fans_mw", "dt_inlet_excursion_k")
IT_ATTRS = ("p_it_mw", "p_loss_mw")


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    wanted = [f"{e}.{a}" for e in roles.entities_with("it") for a in IT_ATTRS]
    wanted += [f"{e}.{a}" for e in roles.entities_with("cooling") for a in COOLING_ATTRS]
    wanted += [f"{e}.{a}" for e in roles.entities_with("air_handler") for a in AIR_ATTRS]
    return [c for c in wanted if c in names]


def it_columns(ts: pd.DataFrame, roles: RunRoles, within: set[str] | None = None) -> list[str]:
    """Per IT entity (of those ``within``), the recorded column of its server power ``p_it_mw``."""
    return [f"{e}.p_it_mw" for e in roles.entities_with("it")
            if (within is None or e in within) and f"{e}.p_it_mw" in ts.columns]


def facility_kpis(ts: pd.DataFrame, dt_h: float, roles: RunRoles, within: set[str] | None = None) -> dict[str, Any]:
    """The facility block over the entities ``within`` (default: all); see the module docstring."""
    it_cols = it_columns(ts, roles, within)
    if not it_cols:
        return {}

    def of(role: str, attr: str) -> list[str]:
        return [f"{e}.{attr}" for e in roles.entities_with(role)
                if (within is None or e in within) and f"{e}.{attr}" in ts.columns]

    cooling_cols = of("cooling", "p_cooling_mw") + of("air_handler", "p_fans_mw")
    it_mwh = sum(energy_mwh(ts[c], dt_h) for c in it_cols)
    out: dict[str, Any] = {"it_mwh": finite(it_mwh), "it_columns": it_cols}
    if not cooling_cols or it_mwh <= 0:
        return out
    cooling_mwh = sum(energy_mwh(ts[c], dt_h) for c in cooling_cols)
    loss_cols = [c.replace(".p_it_mw", ".p_loss_mw") for c in it_cols]
    loss_mwh = sum(energy_mwh(ts[c], dt_h) for c in loss_cols if c in ts.columns)
    out.update({"cooling_mwh": finite(cooling_mwh), "power_delivery_loss_mwh": finite(loss_mwh),
                "cooling_columns": cooling_cols, "pue_ratio": finite((it_mwh + loss_mwh + cooling_mwh) / it_mwh)})
    water = of("cooling", "water_m3")
    if water:
        water_m3 = sum(float(ts[c].dropna().iloc[-1]) for c in water if ts[c].notna().any())
        out.update({"water_m3": finite(water_m3), "wue_l_kwh": finite(water_m3 / it_mwh)})
    unmet = of("cooling", "q_unmet_mw")
    if unmet:
        out["unmet_cooling_mwh"] = finite(sum(energy_mwh(ts[c], dt_h) for c in unmet))
    excursion = of("air_handler", "dt_inlet_excursion_k")
    if excursion:
        out["inlet_excursion_s"] = finite(max(float((ts[c] > 0).sum()) for c in excursion) * dt_h * 3600.0)
    return out


def facility_by_it(ts: pd.DataFrame, dt_h: float, roles: RunRoles, links: dict[str, set[str]]) -> dict[str, Any]:
    """:func:`facility_kpis` per IT entity over what its power or heat reaches (module docstring)."""
    out = {}
    for it in roles.entities_with("it"):
        if not it_columns(ts, roles, {it}):
            continue
        group, todo = {it}, [it]
        while todo:
            for nxt in links.get(todo.pop(), ()):
                if nxt not in group and roles.of(nxt) != "it":
                    group.add(nxt)
                    todo.append(nxt)
        block = facility_kpis(ts, dt_h, roles, group)
        if block:
            out[it] = block
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    out: dict[str, Any] = {}
    facility = facility_kpis(inp.ts, inp.dt_h, inp.roles)
    if facility:
        out["facility"] = facility
    by_it = facility_by_it(inp.ts, inp.dt_h, inp.roles, inp.links)
    if len(by_it) > 1:
        out["facility_by_it"] = by_it
    return out


BLOCK = Block("facility", "Facility (PUE, WUE)", 50, _columns, _compute,
              headline=("pue_ratio", "wue_l_kwh", "it_mwh", "cooling_mwh"))
