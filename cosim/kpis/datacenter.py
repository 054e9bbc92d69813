"""What the compute delivered and what the knobs cost it, per IT entity with servers (``p_it_mw``).

From the cluster's own outputs: ``gpu_util_mean_frac`` (mean), the cumulative counters at
the end of the run (``delay_gpu_h``, ``jct_mean_h``, ``wait_mean_h``),
``slo_attainment_mean_frac`` (mean), ``n_tokens`` = Σ tokens_per_s·Δt and ``p_gpu_mean_mw`` (the
GPUs' own mean draw, when the cluster reports ``p_gpu_mw``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, finite, last_value
from cosim.roles import RunRoles

ATTRS = ("p_it_mw", "gpu_util_frac", "delay_gpu_h", "jct_mean_h", "wait_mean_h", "slo_attainment_frac",
         "tokens_per_s", "p_gpu_mw")
MEANS = {"gpu_util_mean_frac": "gpu_util_frac", "slo_attainment_mean_frac": "slo_attainment_frac",
         "p_gpu_mean_mw": "p_gpu_mw"}
LASTS = ("delay_gpu_h", "jct_mean_h", "wait_mean_h")


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    return [f"{e}.{a}" for e in roles.entities_with("it") for a in ATTRS if f"{e}.{a}" in names]


def cluster_kpis(inp: KpiInput, eid: str) -> dict[str, Any]:
    """The block of one IT entity (see the module docstring)."""
    ts = inp.ts
    out: dict[str, Any] = {}
    for key, attr in MEANS.items():
        if inp.col(eid, attr):
            out[key] = finite(ts[f"{eid}.{attr}"].mean())
    for attr in LASTS:
        if inp.col(eid, attr):
            out[attr] = last_value(ts[f"{eid}.{attr}"])
    if inp.col(eid, "tokens_per_s"):
        out["n_tokens"] = finite(float(np.nansum(ts[f"{eid}.tokens_per_s"].to_numpy(float))) * inp.dt_h * 3600.0)
    ordered = ("gpu_util_mean_frac", "delay_gpu_h", "jct_mean_h", "wait_mean_h", "slo_attainment_mean_frac",
               "n_tokens", "p_gpu_mean_mw")
    return {k: out[k] for k in ordered if out.get(k) is not None}


def _compute(inp: KpiInput) -> dict[str, Any]:
    clusters = {e: cluster_kpis(inp, e) for e in inp.roles.entities_with("it") if inp.col(e, "p_it_mw")}
    return {"datacenter": clusters} if clusters else {}


BLOCK = Block("datacenter", "Datacenter", 40, _columns, _compute,
              headline=("gpu_util_mean_frac", "delay_gpu_h", "slo_attainment_mean_frac", "n_tokens"))
