"""What power smoothing cost: the GPU power floor's energy, the ramp limiter's withheld work, the rack
storage's losses (adapters/datacenter/smoothing.py; recorded with sim param ``smoothing_outputs = true``).

Per datacenter entity that records ``p_floor_mw`` (or ``p_rack_loss_mw``, ``ramp_lost_gpu_h``):

    floor_mwh          = Σ p_floor_mw · Δt        energy the floor burned above the demand
    rack_loss_mwh      = Σ p_rack_loss_mw · Δt    the rack storage's round-trip losses
    ramp_lost_gpu_h    = the last ramp_lost_gpu_h  GPU-hours of work the ramp limiter withheld (cumulative;
                                                   an upper bound, see the adapter)
    energy_mwh         = Σ p_mw · Δt              the entity's energy over the run
    cost_energy_frac   = (floor_mwh + rack_loss_mwh) / energy_mwh

Put side by side with the ``swing`` block (what the mitigation bought), e.g. by
``cosim compare <sweep folder> --kpis swing.campus --kpis smoothing.campus``.
"""

from __future__ import annotations

from typing import Any

from cosim.kpis._block import Block, KpiInput, energy_mwh, finite, last_value
from cosim.roles import RunRoles

ATTRS = ("p_floor_mw", "p_rack_loss_mw", "ramp_lost_gpu_h")


def _entities(columns) -> list[str]:
    return list(dict.fromkeys(c.rpartition(".")[0] for c in columns if c.rpartition(".")[2] in ATTRS))


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    return [f"{e}.{a}" for e in _entities(columns) for a in (*ATTRS, "p_mw") if f"{e}.{a}" in names]


def entity_kpis(inp: KpiInput, entity: str) -> dict[str, Any]:
    ts = inp.ts
    out: dict[str, Any] = {}
    if inp.col(entity, "p_floor_mw"):
        out["floor_mwh"] = finite(energy_mwh(ts[f"{entity}.p_floor_mw"], inp.dt_h))
    if inp.col(entity, "p_rack_loss_mw"):
        out["rack_loss_mwh"] = finite(energy_mwh(ts[f"{entity}.p_rack_loss_mw"], inp.dt_h))
    if inp.col(entity, "ramp_lost_gpu_h"):
        out["ramp_lost_gpu_h"] = last_value(ts[f"{entity}.ramp_lost_gpu_h"])
    if inp.col(entity, "p_mw"):
        total = energy_mwh(ts[f"{entity}.p_mw"], inp.dt_h)
        out["energy_mwh"] = finite(total)
        spent = (out.get("floor_mwh") or 0.0) + (out.get("rack_loss_mwh") or 0.0)
        out["cost_energy_frac"] = finite(spent / total) if total > 0 else None
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    found = {e: entity_kpis(inp, e) for e in _entities(inp.ts.columns)}
    return {"smoothing": found} if found else {}


BLOCK = Block("smoothing", "Power smoothing cost", 88, _columns, _compute,
              headline=("cost_energy_frac", "floor_mwh", "ramp_lost_gpu_h", "rack_loss_mwh"))
