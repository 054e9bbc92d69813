"""Energy of every entity that reports ``p_mw``, and the run's duration.

Per entity: ``energy_mwh`` = Σ p_mw·Δt (consumer sign for loads and storage, generator sign
for generation), ``peak_mw`` = max p_mw, ``mean_mw``, ``load_factor_frac`` = mean / peak;
``model`` and ``role`` say what the entity is.
"""

from __future__ import annotations

from typing import Any

from cosim.kpis._block import Block, KpiInput, energy_mwh, ending, finite
from cosim.kpis.grid import load_factor_frac
from cosim.roles import RunRoles


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    return ending(columns, ".p_mw")


def _compute(inp: KpiInput) -> dict[str, Any]:
    out: dict[str, Any] = {"duration_h": round(len(inp.ts) * inp.dt_h, 9)}
    entities: dict[str, Any] = {}
    for column in ending(inp.ts.columns, ".p_mw"):
        entity = column.partition(".")[0]
        p = inp.ts[column]
        entities[entity] = {"role": inp.roles.role_of_column(column) or inp.roles.of(entity),
                            "energy_mwh": finite(energy_mwh(p, inp.dt_h)), "peak_mw": finite(p.max()),
                            "mean_mw": finite(p.mean()), "load_factor_frac": finite(load_factor_frac(p))}
    if entities:
        out["entities"] = entities
    return out


BLOCK = Block("energy", "Energy per entity", 10, _columns, _compute, headline=("energy_mwh", "peak_mw"))
