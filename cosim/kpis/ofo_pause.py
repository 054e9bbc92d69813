"""Flexible training paused by an OFO controller, and the GPU-hours it deferred.

An ``OFO`` entity with the pause control (``adapters/controllers/ofo/``; ``[sims.<id>] pause =
true``) records ``pause_flexible_frac`` (its command to the Cluster), ``p_paused_mw`` and
``n_gpus_paused`` (that command in MW and GPUs, by its ``p_pause_mw`` / ``n_gpus_pause``) and
``paused_gpu_h`` (Σ_steps n_gpus_paused · Δt / 3600 so far). This block reports per such entity:

* ``paused_gpu_h``: the GPU-hours of flexible training deferred by the run's commands (the last value);
* ``pause_mean_frac``, ``pause_max_frac``: mean and largest ``pause_flexible_frac``;
* ``p_paused_mean_mw``, ``n_gpus_paused_mean``: the mean paused power and GPUs (the model's figures;
  the Cluster's ``n_jobs_paused`` and ``delay_gpu_h`` say what it did with the command).
"""

from __future__ import annotations

from typing import Any

from cosim.kpis._block import Block, KpiInput, finite, last_value
from cosim.roles import RunRoles

ATTRS = ("pause_flexible_frac", "p_paused_mw", "n_gpus_paused", "paused_gpu_h")


def _entities(columns: list[str]) -> list[str]:
    names = set(columns)
    return sorted({c.split(".", 1)[0] for c in columns if c.endswith(".paused_gpu_h")
                   and f"{c.split('.', 1)[0]}.pause_flexible_frac" in names})


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    return [f"{e}.{a}" for e in _entities(columns) for a in ATTRS if f"{e}.{a}" in names]


def _compute(inp: KpiInput) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for eid in _entities(list(inp.ts.columns)):
        ts = inp.ts
        frac = ts[f"{eid}.pause_flexible_frac"]
        entry: dict[str, Any] = {"paused_gpu_h": last_value(ts[f"{eid}.paused_gpu_h"]),
                                 "pause_mean_frac": finite(frac.mean()), "pause_max_frac": finite(frac.max())}
        if inp.col(eid, "p_paused_mw"):
            entry["p_paused_mean_mw"] = finite(ts[f"{eid}.p_paused_mw"].mean())
        if inp.col(eid, "n_gpus_paused"):
            entry["n_gpus_paused_mean"] = finite(ts[f"{eid}.n_gpus_paused"].mean())
        out[eid] = entry
    return {"ofo_pause": out} if out else {}


BLOCK = Block("ofo_pause", "Flexible training paused by OFO", 74, _columns, _compute,
              headline=("paused_gpu_h", "pause_mean_frac"))
