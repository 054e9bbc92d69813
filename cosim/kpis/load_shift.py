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
  ``slo_attainment_mean_frac``: the throughput and latency effect of the move, per site.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, finite, last_value
from cosim.roles import RunRoles

SITE_ATTRS = ("tokens_per_s", "itl_p99_ms", "slo_attainment_frac")
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
            wanted += [f"{eid}.n_moved_in_{s}", f"{eid}.moved_in_{s}_per_s", *(f"{s}.{a}" for a in SITE_ATTRS)]
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
            entry[s] = site
        out[eid] = entry
    return {"load_shift": out} if out else {}


BLOCK = Block("load_shift", "Load shifting between sites", 72, _columns, _compute,
              headline=("n_shifts",))
