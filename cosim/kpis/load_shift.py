"""Cross-site load shifting: what moved, and what each site served, per ``LoadShift`` entity.

A load-shifting controller (``adapters/controllers/load_shift.py``) records ``n_shifts`` and per
site ``n_moved_in_<site>``, ``moved_in_<site>_per_s`` (net replicas and net demand received; negative
= given away). This block reports per controller ``n_shifts`` and per site:

* ``n_moved_in_final`` (net replicas received by the end), ``n_requests_moved_in`` = Σ_t
  moved_in_per_s · Δt (net requests routed in over the run: the moved load; the sites' entries
  sum to zero, the moved demand is conserved);
* when the site names a Cluster entity (the controller's convention) and its outputs are
  recorded: ``n_tokens`` = Σ tokens_per_s · Δt, ``tokens_mean_per_s``, ``itl_p99_mean_ms``
  (mean of the per-step p99 inter-token latency over the steps it served) and
  ``slo_attainment_mean_frac``: the throughput and latency effect of the move, per site;
* with training moves (the controller records ``n_train_moves``): per controller ``n_train_moves``,
  per site ``n_train_moved_in_final`` (net jobs received), ``train_moved_in_gpu_h`` (net remaining
  work received, GPU-hours at full speed), and from the site's Cluster ``work_gpu_h`` (training
  GPU-hours done there over the run, the guests' included), ``guest_work_gpu_h`` (those of the
  moved-in jobs) and ``n_jobs_moved_out`` / ``n_jobs_moved_in`` (gross, as the site counted them);
* with a carbon signal per site (the controller's ``ci_<site>_g_kwh``, what it acted on):
  ``carbon_t`` = Σ p_mw · ci · Δt of the site's Cluster (its own meter, each site in its own zone),
  and per controller ``carbon_total_t`` and ``work_total_gpu_h`` over the sites. A total is over
  every site or none: when some sites have the figure and others not (their columns not recorded),
  the total is null and the controller's ``scope`` names the sites without it (a sum over the
  others would read as the whole); when no site has it, it is absent.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, carbon_t, finite, last_value
from cosim.roles import RunRoles

SITE_ATTRS = ("tokens_per_s", "itl_p99_ms", "slo_attainment_frac", "p_mw", "work_gpu_h", "guest_work_gpu_h",
              "n_jobs_moved_out", "n_jobs_moved_in")
_MOVED = re.compile(r"^(?P<eid>[^.]+)\.n_moved_in_(?P<site>.+)$")


def _controllers(columns: list[str]) -> dict[str, list[str]]:
    """LoadShift entities (they record ``n_shifts``) and their sites, from the column names."""
    names = set(columns)
    out: dict[str, list[str]] = {}
    for c in columns:
        m = _MOVED.match(c)
        if m and f"{m['eid']}.n_shifts" in names:
            out.setdefault(m["eid"], []).append(m["site"])
    return out


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    wanted = []
    for eid, sites in _controllers(columns).items():
        wanted.append(f"{eid}.n_shifts")
        for s in sites:
            wanted += [f"{eid}.n_moved_in_{s}", f"{eid}.moved_in_{s}_per_s", f"{eid}.ci_{s}_g_kwh",
                       f"{eid}.n_train_moved_in_{s}", f"{eid}.train_moved_in_{s}_gpu_h",
                       *(f"{s}.{a}" for a in SITE_ATTRS)]
        wanted.append(f"{eid}.n_train_moves")
    return [c for c in wanted if c in names]


def _compute(inp: KpiInput) -> dict[str, Any]:
    ts, dt_s = inp.ts, inp.dt_h * 3600.0
    out: dict[str, Any] = {}
    for eid, sites in _controllers(list(ts.columns)).items():
        entry: dict[str, Any] = {"n_shifts": last_value(ts[f"{eid}.n_shifts"])}
        for s in sites:
            site: dict[str, Any] = {"n_moved_in_final": last_value(ts[f"{eid}.n_moved_in_{s}"])}
            if inp.col(eid, f"moved_in_{s}_per_s"):
                site["n_requests_moved_in"] = finite(float(np.nansum(ts[f"{eid}.moved_in_{s}_per_s"].to_numpy(float)))
                                                   * dt_s)
            if inp.col(s, "tokens_per_s"):
                tps = ts[f"{s}.tokens_per_s"].to_numpy(float)
                site["n_tokens"] = finite(float(np.nansum(tps)) * dt_s)
                site["tokens_mean_per_s"] = finite(float(np.nanmean(tps)))
            if inp.col(s, "itl_p99_ms"):
                itl = ts[f"{s}.itl_p99_ms"].to_numpy(float)
                served = itl[itl > 0]
                site["itl_p99_mean_ms"] = finite(float(served.mean())) if len(served) else None
            if inp.col(s, "slo_attainment_frac"):
                site["slo_attainment_mean_frac"] = finite(float(ts[f"{s}.slo_attainment_frac"].mean()))
            _training(inp, eid, s, site)
            entry[s] = site
        if inp.col(eid, "n_train_moves"):
            entry["n_train_moves"] = last_value(ts[f"{eid}.n_train_moves"])
        _totals(entry, sites)
        out[eid] = entry
    return {"load_shift": out} if out else {}


def _totals(entry: dict[str, Any], sites: list[str]) -> None:
    """``carbon_total_t`` and ``work_total_gpu_h`` over every site, null (and said in ``scope``) when
    only some sites have the figure, absent when none has."""
    missing = []
    for total, key in (("carbon_total_t", "carbon_t"), ("work_total_gpu_h", "work_gpu_h")):
        values = {s: entry[s].get(key) for s in sites}
        lacking = [s for s, value in values.items() if value is None]
        if len(lacking) == len(sites):
            continue
        entry[total] = None if lacking else finite(sum(values.values()))
        if lacking:
            missing.append(f"{total} is null: no {key} for {', '.join(lacking)}")
    if missing:
        entry["scope"] = "totals over every site; " + "; ".join(missing)


def _training(inp: KpiInput, eid: str, s: str, site: dict[str, Any]) -> None:
    """The training-move and carbon entries of one site (those its columns allow)."""
    ts = inp.ts
    for key, col in (("n_train_moved_in_final", f"{eid}.n_train_moved_in_{s}"),
                     ("train_moved_in_gpu_h", f"{eid}.train_moved_in_{s}_gpu_h"),
                     ("work_gpu_h", f"{s}.work_gpu_h"), ("guest_work_gpu_h", f"{s}.guest_work_gpu_h"),
                     ("n_jobs_moved_out", f"{s}.n_jobs_moved_out"), ("n_jobs_moved_in", f"{s}.n_jobs_moved_in")):
        if col in ts:
            site[key] = last_value(ts[col])
    ci = f"{eid}.ci_{s}_g_kwh"
    if ci in ts and inp.col(s, "p_mw") and ts[ci].notna().any():
        site["carbon_t"] = finite(carbon_t(ts[f"{s}.p_mw"], ts[ci], inp.dt_h))


BLOCK = Block("load_shift", "Load shifting between sites", 72, _columns, _compute,
              headline=("n_shifts",))
