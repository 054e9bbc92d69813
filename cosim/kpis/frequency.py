"""System frequency of every entity that reports ``f_hz`` (a balancing area of adapters/frequency.py).

Per entity, from the recorded samples (the area's own ``f_nadir_hz`` / ``f_zenith_hz``, tracked
over its 10 ms sub-steps, when recorded): ``f_nadir_hz`` and ``f_zenith_hz``, their times
``t_nadir_s`` / ``t_zenith_s`` from the start, ``dev_max_hz`` (largest |f − f0|, f0 the first
sample: the area starts at its operating point), ``rocof_max_hz_s`` (largest |df/dt| of the
``rocof_hz_s`` samples), ``f_final_hz``, and the time outside bands around f0:
``outside_100mhz_s``, ``outside_200mhz_s``, ``outside_500mhz_s`` (Δt × samples).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, ending, finite
from cosim.roles import RunRoles

BANDS_MHZ = (100, 200, 500)


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    areas = [c.rpartition(".")[0] for c in ending(columns, ".f_hz")]
    names = set(columns)
    return [f"{a}.{x}" for a in areas for x in ("f_hz", "rocof_hz_s", "f_nadir_hz", "f_zenith_hz") if f"{a}.{x}" in names]


def area_kpis(inp: KpiInput, area: str) -> dict[str, Any]:
    f = inp.ts[f"{area}.f_hz"].to_numpy(float)
    if not len(f) or np.isnan(f).all():
        return {}
    seconds = (inp.ts.index - inp.ts.index[0]).total_seconds().to_numpy()
    f0, dev = f[0], np.abs(f - f[0])
    lo, hi = int(np.nanargmin(f)), int(np.nanargmax(f))
    out: dict[str, Any] = {
        "f_nadir_hz": finite(np.nanmin(f)), "t_nadir_s": finite(seconds[lo]),
        "f_zenith_hz": finite(np.nanmax(f)), "t_zenith_s": finite(seconds[hi]),
        "dev_max_hz": finite(np.nanmax(dev)), "f_final_hz": finite(f[-1]), "f_start_hz": finite(f0)}
    for attr, pick in (("f_nadir_hz", min), ("f_zenith_hz", max)):
        column = inp.col(area, attr)
        if column is not None and inp.ts[column].notna().any():
            out[attr] = finite(pick(out[attr], float(inp.ts[column].dropna().iloc[-1])))
    rocof = inp.col(area, "rocof_hz_s")
    if rocof is not None:
        out["rocof_max_hz_s"] = finite(np.nanmax(np.abs(inp.ts[rocof].to_numpy(float))))
    for band in BANDS_MHZ:
        out[f"outside_{band}mhz_s"] = finite(float(np.sum(dev > band / 1000.0)) * inp.dt_h * 3600.0)
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    found = {c.rpartition(".")[0]: area_kpis(inp, c.rpartition(".")[0]) for c in ending(inp.ts.columns, ".f_hz")}
    found = {k: v for k, v in found.items() if v}
    return {"frequency": found} if found else {}


BLOCK = Block("frequency", "System frequency", 80, _columns, _compute,
              headline=("f_nadir_hz", "f_zenith_hz", "rocof_max_hz_s", "outside_200mhz_s"))
