"""Carbon of the whole feeder: the grid's import at its slack times the carbon signal.

``carbon.feeder_import_t`` = Σ max(p_import_mw, 0)·Δt·ci_g_kwh / 1000 (1 MWh × 1 g/kWh =
1 kg) over the first grid's import and the first recorded ``<entity>.ci_g_kwh`` signal. It
covers everything the feeder serves (its background loads as well as the site); the site's
own emissions behind its meter are ``accounting.carbon``.
"""

from __future__ import annotations

from typing import Any

from cosim.kpis._block import Block, KpiInput, carbon_t, ending, finite
from cosim.kpis.grid import grid_entities
from cosim.roles import RunRoles

SCOPE = "grid import at the feeder's slack: the whole feeder (background loads included), not only the site"


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    return [*ending(columns, ".ci_g_kwh"), *(f"{g}.{a}" for g in roles.entities_with("grid")
                                            for a in ("p_import_mw", "converged") if f"{g}.{a}" in names)]


def _compute(inp: KpiInput) -> dict[str, Any]:
    ci = ending(inp.ts.columns, ".ci_g_kwh")
    grids = grid_entities(inp)
    if not (ci and grids):
        return {}
    p_import = inp.ts[f"{grids[0]}.p_import_mw"]
    flag = f"{grids[0]}.converged"
    unsolved = flag in inp.ts and bool((inp.ts[flag].to_numpy(float) < 0.5).any())
    feeder_t = None if unsolved else finite(carbon_t(p_import, inp.ts[ci[0]], inp.dt_h))  # unknown import: unknown carbon
    return {"carbon": {"scope": SCOPE, "signal": ci[0], "grid": grids[0], "feeder_import_t": feeder_t,
                       "mean_ci_g_kwh": finite(inp.ts[ci[0]].mean())}}


BLOCK = Block("carbon", "Carbon of the feeder", 30, _columns, _compute, headline=("feeder_import_t",))
