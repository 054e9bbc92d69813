"""Event windows: what every load drew, and what the compute did, while a grid event was in force.

The windows are the runs of steps in which any recorded ``<entity>.event_active`` is true (the
``dr_events`` adapter and event-driven controllers report it). Every value is held over its
step of Δt. Entries of ``events``:

* ``windows``: ``[{start_utc, end_utc, duration_h}]``; ``duration_h``: their total;
* per entity with a demand role's power (``it``, ``load``, ``cooling``, ``air_handler``):
  ``energy_mwh`` = Σ p·Δt over the windows and ``mean_mw``; ``site``: the same for all of them;
* per IT entity also the growth over the windows of its cumulative counters
  (``delay_gpu_h``, ``slowdown_gpu_h``, ``work_gpu_h`` and ``work_<class>_gpu_h``: last value
  in a window minus the last before it), ``slowdown_frac`` = Δslowdown / (Δslowdown + Δwork) (the training throughput lost
  to caps), ``n_tokens`` = Σ tokens_per_s·Δt, ``slo_attainment_mean_frac`` and ``p_gpu_mean_mw``
  (the GPUs' own draw, the meter of trials that count GPU power only);
* per entity reporting a target (``p_target_mw``) and its meter (``p_metered_mw``), the tracking:
  ``tracking_rmse_mw`` = sqrt(mean (metered − target)²) over the windows, ``tracking_rmse_frac``
  (over the mean ``p_baseline_mw`` when reported, else the mean target), ``tracking_max_mw``,
  ``response_max_s``: over the windows, the longest time from a window's start (or a step
  change of the target inside it) until the meter is at most ``RESPONSE_BAND_FRAC`` of the
  baseline above the target (a reduction target is a ceiling: below it counts as met), and ``cut_frac`` = 1 − mean metered / mean baseline; the same per
  window under ``windows[i].<entity>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cosim.kpis._block import Block, KpiInput, ending, finite
from cosim.roles import DEMAND_ROLES, RunRoles

#: Cumulative counters of an IT entity (the cluster's useful GPU-hours also per training class).
COUNTERS = ("delay_gpu_h", "slowdown_gpu_h", "work_gpu_h", "work_high_gpu_h", "work_normal_gpu_h", "work_low_gpu_h")
IT_ATTRS = (*COUNTERS, "tokens_per_s", "slo_attainment_frac", "p_gpu_mw")
TRACK_ATTRS = ("p_target_mw", "p_metered_mw", "p_baseline_mw")
#: A target is met when the meter is within this share of the baseline of it. [-]
RESPONSE_BAND_FRAC = 0.02


def windows(active: np.ndarray) -> list[tuple[int, int]]:
    """``[(first row, row after the last)]`` of each run of active rows."""
    edges = np.diff(np.concatenate([[0], active.astype(int), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def growth(series: np.ndarray, spans: list[tuple[int, int]]) -> float:
    """Σ over spans of (last value in the span − last value before it; the first in it when none)."""
    total = 0.0
    for a, b in spans:
        before = series[a - 1] if a > 0 else series[a]
        total += float(series[b - 1] - before)
    return total


def response_s(metered: np.ndarray, target: np.ndarray, band_mw: float, spans: list[tuple[int, int]],
               dt_s: float) -> float | None:
    """Longest time from a window start or a target step until the meter is at most ``band_mw`` above it. [s]

    A reduction target is a ceiling: a meter below it has met it.

    None when some target is never reached before the window ends or the target changes again.
    """
    worst = 0.0
    for a, b in spans:
        starts = [a] + [k for k in range(a + 1, b) if target[k] != target[k - 1]]
        for i, s in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else b
            inside = np.flatnonzero(metered[s:end] - target[s:end] <= band_mw)  # a ceiling: below is met
            if len(inside) == 0:
                return None
            worst = max(worst, float(inside[0]) * dt_s)
    return worst


def _it_entry(inp: KpiInput, eid: str, mask: np.ndarray, spans: list[tuple[int, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in COUNTERS:
        if inp.col(eid, attr):
            out[attr] = finite(growth(inp.ts[f"{eid}.{attr}"].ffill().fillna(0.0).to_numpy(float), spans))
    if out.get("slowdown_gpu_h") is not None and out.get("work_gpu_h") is not None:
        busy = out["slowdown_gpu_h"] + out["work_gpu_h"]
        out["slowdown_frac"] = finite(out["slowdown_gpu_h"] / busy) if busy > 0 else 0.0
    if inp.col(eid, "tokens_per_s"):
        out["n_tokens"] = finite(float(np.nansum(inp.ts[f"{eid}.tokens_per_s"].to_numpy(float)[mask]))
                                 * inp.dt_h * 3600.0)
    if inp.col(eid, "p_gpu_mw"):
        out["p_gpu_mean_mw"] = finite(np.nanmean(inp.ts[f"{eid}.p_gpu_mw"].to_numpy(float)[mask]))
    if inp.col(eid, "slo_attainment_frac"):
        out["slo_attainment_mean_frac"] = finite(np.nanmean(inp.ts[f"{eid}.slo_attainment_frac"].to_numpy(float)[mask]))
    return out


def _tracking(inp: KpiInput, eid: str, mask: np.ndarray, spans: list[tuple[int, int]]) -> dict[str, Any]:
    target = inp.ts[f"{eid}.p_target_mw"].to_numpy(float)
    metered = inp.ts[f"{eid}.p_metered_mw"].to_numpy(float)
    err = (metered - target)[mask]
    base = inp.ts[f"{eid}.p_baseline_mw"].to_numpy(float)[mask] if inp.col(eid, "p_baseline_mw") else target[mask]
    scale = float(np.nanmean(base))
    rmse = float(np.sqrt(np.nanmean(err ** 2)))
    response = response_s(metered, target, RESPONSE_BAND_FRAC * scale, spans, inp.dt_h * 3600.0)
    cut = 1.0 - float(np.nanmean(metered[mask])) / scale if scale else None
    return {"tracking_rmse_mw": finite(rmse), "tracking_rmse_frac": finite(rmse / scale) if scale else None,
            "tracking_max_mw": finite(np.nanmax(np.abs(err))), "response_max_s": finite(response),
            "cut_frac": finite(cut)}


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    flags = ending(columns, ".event_active")
    if not flags:
        return []
    wanted = list(flags) + roles.power_columns(DEMAND_ROLES, columns)
    wanted += [f"{e}.{a}" for e in roles.entities_with("it") for a in IT_ATTRS]
    wanted += [c for c in columns if c.endswith(tuple("." + a for a in TRACK_ATTRS))]
    return [c for c in dict.fromkeys(wanted) if c in names]


def _compute(inp: KpiInput) -> dict[str, Any]:
    flags = ending(inp.ts.columns, ".event_active")
    if not flags:
        return {}
    mask = np.zeros(len(inp.ts), bool)
    for column in flags:
        mask |= inp.ts[column].fillna(False).astype(bool).to_numpy()
    if not mask.any():
        return {}
    spans = windows(mask)
    step = pd.Timedelta(hours=inp.dt_h)
    index = inp.ts.index
    out: dict[str, Any] = {
        "windows": [{"start_utc": index[a].isoformat(), "end_utc": (index[b - 1] + step).isoformat(),
                     "duration_h": finite((b - a) * inp.dt_h)} for a, b in spans],
        "duration_h": finite(mask.sum() * inp.dt_h)}
    site = 0.0
    for column in inp.roles.power_columns(DEMAND_ROLES, list(inp.ts.columns)):
        eid = column.rpartition(".")[0]
        energy = float(np.nansum(inp.ts[column].to_numpy(float)[mask])) * inp.dt_h
        site += energy
        out.setdefault(eid, {}).update({"energy_mwh": finite(energy), "mean_mw": finite(energy / (mask.sum() * inp.dt_h))})
    out["site"] = {"energy_mwh": finite(site), "mean_mw": finite(site / (mask.sum() * inp.dt_h))}
    for eid in inp.roles.entities_with("it"):
        entry = _it_entry(inp, eid, mask, spans)
        if entry:
            out.setdefault(eid, {}).update(entry)
    for column in ending(inp.ts.columns, ".p_target_mw"):
        eid = column.rpartition(".")[0]
        if inp.col(eid, "p_metered_mw"):
            out.setdefault(eid, {}).update(_tracking(inp, eid, mask, spans))
            for window, (a, b) in zip(out["windows"], spans):
                alone = np.zeros(len(mask), bool)
                alone[a:b] = True
                window[eid] = _tracking(inp, eid, alone, [(a, b)])
    return {"events": out}


BLOCK = Block("events", "Event windows", 80, _columns, _compute,
              headline=("energy_mwh", "slowdown_frac", "tracking_rmse_frac", "response_max_s"))
