"""How the training scheduler used the GPUs, per IT entity reporting the scheduling outputs.

Read from the cluster's outputs (datacenter sim param ``scheduling_outputs = true``; a run
without them has no such block). With Δt the recording step [h]:

* ``gpu_idle_gpu_h`` = Σ n_gpus_idle·Δt; ``n_gpus_frag_mean`` and ``gpu_frag_of_idle_mean_frac``:
  means of FGD's fragmented GPUs and of their share of the idle GPUs;
* ``p_it_mean_mw``, ``p_train_idle_mean_mw``: mean IT power and mean power of idle training
  capacity; ``n_nodes_asleep_mean``;
* ``jct_mean_h``, ``jct_p99_h``, ``wait_mean_h``, ``wait_p99_h``, ``ftf_rho_mean_ratio``,
  ``ftf_rho_max_ratio``, ``done_gpu_h``: the cluster's cumulative values at the end (jobs
  submitted at or after the start);
* ``e_it_per_done_gpu_h_kwh`` = Σ p_it_mw·Δt·1000 / done_gpu_h: IT energy of the run per
  GPU-hour of work completed in it;
* ``dr_shed_cap_mean_mw``, ``dr_shed_mean_mw``, ``dr_shed_min_mw``: what the cluster could shed
  within a step by caps alone, and by pausing flexible jobs and capping the rest (mean and
  worst over the run); ``dr_shed_mean_frac`` the latter over the facility's mean ``p_mw``;
* ``n_gpus_mig``, ``n_mig_slices_frag``: the MIG pool's GPUs and unusable free memory slices;
* ``n_job_failures``, ``n_jobs_failed``, ``lost_gpu_h``: failures so far, jobs they ended, and
  the GPU-hours of work lost since the failed jobs' last checkpoints (the cluster's totals at the end);
* transient burst capacity: ``n_gpus_transient_mean``, ``p_transient_mean_mw`` (off-site power,
  not in the facility's), final ``transient_gpu_h``, ``transient_cost_usd``,
  ``n_transient_revoked``, and ``wait_short_mean_h`` (mean wait of the short jobs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, finite, last_value
from cosim.roles import RunRoles

#: The column that marks an entity reporting the scheduling outputs.
MARK = "n_gpus_frag"
ATTRS = ("p_mw", "p_it_mw", "n_gpus_idle", "n_gpus_frag", "gpu_frag_of_idle_frac", "n_nodes_asleep",
         "p_train_idle_mw", "jct_mean_h", "jct_p99_h", "wait_mean_h", "wait_p99_h", "ftf_rho_mean_ratio",
         "ftf_rho_max_ratio", "done_gpu_h", "p_shed_cap_mw", "p_shed_mw", "n_gpus_mig", "n_mig_slices_frag",
         "n_job_failures", "n_jobs_failed", "lost_gpu_h", "n_gpus_transient", "p_transient_mw",
         "transient_gpu_h", "transient_cost_usd", "n_transient_revoked", "wait_short_mean_h")
MEANS = {"n_gpus_frag_mean": "n_gpus_frag", "gpu_frag_of_idle_mean_frac": "gpu_frag_of_idle_frac",
         "p_it_mean_mw": "p_it_mw", "p_train_idle_mean_mw": "p_train_idle_mw", "n_nodes_asleep_mean": "n_nodes_asleep",
         "dr_shed_cap_mean_mw": "p_shed_cap_mw", "dr_shed_mean_mw": "p_shed_mw",
         "n_gpus_transient_mean": "n_gpus_transient", "p_transient_mean_mw": "p_transient_mw"}
LASTS = ("jct_mean_h", "jct_p99_h", "wait_mean_h", "wait_p99_h", "ftf_rho_mean_ratio", "ftf_rho_max_ratio",
         "done_gpu_h", "n_gpus_mig", "n_mig_slices_frag", "n_job_failures", "n_jobs_failed", "lost_gpu_h",
         "transient_gpu_h", "transient_cost_usd", "n_transient_revoked", "wait_short_mean_h")


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    return [f"{e}.{a}" for e in roles.entities_with("it") if f"{e}.{MARK}" in names
            for a in ATTRS if f"{e}.{a}" in names]


def _series(inp: KpiInput, eid: str, attr: str) -> np.ndarray | None:
    col = inp.col(eid, attr)
    return inp.ts[col].to_numpy(float) if col else None


def entity_kpis(inp: KpiInput, eid: str) -> dict[str, Any]:
    """The block of one IT entity (module docstring)."""
    out: dict[str, Any] = {}
    idle = _series(inp, eid, "n_gpus_idle")
    if idle is not None:
        out["gpu_idle_gpu_h"] = finite(np.nansum(idle) * inp.dt_h)
    for key, attr in MEANS.items():
        values = _series(inp, eid, attr)
        if values is not None:
            out[key] = finite(np.nanmean(values))
    for attr in LASTS:
        if inp.col(eid, attr):
            out[attr] = last_value(inp.ts[f"{eid}.{attr}"])
    p_it = _series(inp, eid, "p_it_mw")
    if p_it is not None and out.get("done_gpu_h"):
        out["e_it_per_done_gpu_h_kwh"] = finite(np.nansum(p_it) * inp.dt_h * 1000.0 / out["done_gpu_h"])
    shed, p_mw = _series(inp, eid, "p_shed_mw"), _series(inp, eid, "p_mw")
    if shed is not None:
        out["dr_shed_min_mw"] = finite(np.nanmin(shed))
        if p_mw is not None and np.nanmean(p_mw) > 0:
            out["dr_shed_mean_frac"] = finite(np.nanmean(shed) / np.nanmean(p_mw))
    return {k: v for k, v in out.items() if v is not None}


def _compute(inp: KpiInput) -> dict[str, Any]:
    found = {e: entity_kpis(inp, e) for e in inp.roles.entities_with("it") if inp.col(e, MARK)}
    return {"scheduling": found} if found else {}


BLOCK = Block("scheduling", "Training scheduling", 75, _columns, _compute,
              headline=("jct_mean_h", "jct_p99_h", "n_gpus_frag_mean", "ftf_rho_max_ratio", "dr_shed_mean_mw"))
