"""Guards on a finished run: controllers that chatter between their limits or sit at their floor.

Validation warns about what a scenario's parameters alone show (placeholder ratings, a time
constant shorter than the step); these two show only in what a controller did, so they are read
from the recorded outputs of every ``controller`` entity that feed another entity (its setpoints,
from the scenario's connections; not its diagnostics such as a dual variable), after the run:

* **limit cycling** (a loop gain too high for the step, e.g. a stiff Q-V droop on a weak bus:
  ``v_(k+1) = v0 + s·gain·(v_ref − v_k)`` diverges into a ±limit oscillation when ``s·gain ≥ 1``,
  adapters/controllers/storage_droop.py): the share of steps at which the output's change reverses
  direction with both changes at least half the output's range, ``chatter_frac``;
* **saturation at the floor** (a controller with no authority left, e.g. multi-site OFO without
  load shifting driving every site to zero): for an output that starts at (within 10 % of) its
  highest value, full authority, as a knob does (a diagnostic such as a dual variable starts at
  0 and is not judged), the share of the run's steps at which it, once it first moved, sits at
  its lowest value, when that value is at most a tenth of its highest, ``floor_frac``.

A third guard reads the grids (role ``grid``): **voltage collapse**, the network's lowest voltage
``vm_min_pu`` below :data:`COLLAPSE_PU` (0.5 pu) for :data:`COLLAPSE_S` (5 s) or more of the run in
all. A power flow can converge there (OpenDSS serves a load below its ``vminpu`` as an impedance,
so the step "solves" at a few percent of nominal voltage while the load draws a fraction of its
power): the run is ``ok`` but the feeder could not carry what it was given. A fault's dip (a tenth
of a second to a few seconds) stays under the time.

A fourth reads the grid elements (``p_served_mw`` beside ``p_mw``; only the OpenDSS engine serves less
than asked on an energised bus):
**load not served**, :data:`UNSERVED_FRAC` (1 %) or more of the energy an element asked for not
served, because its bus fell below the element's ``vmin_pu`` and OpenDSS served it as an
impedance (its ``p_mw`` output is the setpoint, so it overstates what the grid carried). Steps where
the element was de-energised (served exactly 0) are left to :mod:`cosim.kpis.supply`.

Per column with a finding, ``guards.<entity.attr>`` holds ``chatter_frac`` / ``floor_frac`` (or
``collapse_s`` / ``vm_min_pu``, or ``unserved_frac``) and a ``warning`` text; the run's ``metadata.json`` "warnings" and the report repeat the texts
(:func:`run_warnings`). A guard fires at ``CHATTER_FRAC`` (30 %) and ``FLOOR_FRAC`` (50 %) of the
steps: a controller that does this for less is doing its job in a hard hour.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, finite
from cosim.roles import RunRoles

#: the KPI param (filled by the runner from the scenario's connections) listing ``entity.attr`` outputs
#: that feed another entity: a controller's setpoints. Its diagnostics (duals, counters) are not judged.
FED_PARAM = "guards_fed_columns"
#: values at or above this are "no limit" sentinels (ffr's 1e6 MW facility limit before it acts), not a knob's range.
SENTINEL = 1e6

#: share of steps reversing between the limits above which a loop is said to chatter. [-]
CHATTER_FRAC = 0.3
#: share of steps at the floor above which a controller is said to have saturated. [-]
FLOOR_FRAC = 0.5
#: fewest recorded steps a guard judges.
MIN_STEPS = 10
#: a grid's lowest voltage below this is a collapse, not a sag or a fault's dip. [pu]
COLLAPSE_PU = 0.5
#: time below COLLAPSE_PU, in all, from which a grid is said to have collapsed (longer than faults last). [s]
COLLAPSE_S = 5.0


#: output of a grid element that says what the grid served it (the OpenDSS engine's), beside its p_mw
SERVED_ATTR = "p_served_mw"
#: share of an element's requested energy the grid may leave unserved before a run says so. [-]
UNSERVED_FRAC = 0.01


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    ctl = set(roles.entities_with("controller"))
    grids = {f"{g}.vm_min_pu" for g in roles.entities_with("grid")}
    have = set(columns)
    served = {f"{e}.{a}" for e in roles.entities_with("grid_element") if f"{e}.{SERVED_ATTR}" in have
              for a in ("p_mw", SERVED_ATTR)}
    return [c for c in columns if c.partition(".")[0] in ctl or c in grids or c in served]


def unserved_frac(p_mw: np.ndarray, served_mw: np.ndarray) -> float:
    """Share of the requested energy (``|p_mw|`` summed) the grid did not serve, over the steps it served
    something (a de-energised step, served exactly 0, is the ``supply`` block's ``deenergised_s``). [-]"""
    asked, got = np.abs(np.asarray(p_mw, dtype=float)), np.abs(np.asarray(served_mw, dtype=float))
    ok = np.isfinite(asked) & np.isfinite(got) & (got != 0.0)
    total = float(asked[ok].sum())
    return float(np.clip(asked[ok] - got[ok], 0.0, None).sum() / total) if total > 0 else 0.0


def collapse_s(vm_min_pu: np.ndarray, dt_s: float) -> float:
    """Time the lowest voltage spent below :data:`COLLAPSE_PU`, in all. [s]"""
    return float((np.asarray(vm_min_pu, dtype=float) < COLLAPSE_PU).sum() * dt_s)


def chatter_frac(x: np.ndarray) -> float:
    """Share of steps whose change reverses the previous one, both at least half the range. [-]"""
    x = x[np.isfinite(x)]
    if len(x) < MIN_STEPS:
        return 0.0
    span = float(x.max() - x.min())
    if span <= 0:
        return 0.0
    d = np.diff(x)
    big = np.abs(d) >= 0.5 * span
    flips = (d[1:] * d[:-1] < 0) & big[1:] & big[:-1]
    return float(flips.sum() / (len(x) - 2))


def floor_frac(x: np.ndarray) -> float:
    """Share of the run's steps at which the output, once it first moved, sits at its lowest value,
    when that value is at most a tenth of its highest and the output started within 10 % of its
    highest (0 otherwise: it never moved, its floor is high, or it did not start as a knob). [-]"""
    x = x[np.isfinite(x) & (np.abs(x) < SENTINEL)]
    if len(x) < MIN_STEPS:
        return 0.0
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo or hi <= 0 or lo > 0.1 * hi or x[0] < 0.9 * hi:  # a knob that started with its authority
        return 0.0
    moved = np.flatnonzero(x != x[0])
    after = x[moved[0]:]
    at_floor = np.abs(after - lo) <= 1e-9 * max(abs(hi), 1.0)
    return float(at_floor.sum() / len(x))


def _compute(inp: KpiInput) -> dict[str, Any]:
    found: dict[str, Any] = {}
    fed = inp.params.get(FED_PARAM)
    grids, elements = set(inp.roles.entities_with("grid")), inp.roles.entities_with("grid_element")
    for eid in elements:
        asked, served = inp.col(eid, "p_mw"), inp.col(eid, SERVED_ATTR)
        if asked is None or served is None:
            continue
        frac = unserved_frac(inp.ts[asked].to_numpy(), inp.ts[served].to_numpy())
        if frac >= UNSERVED_FRAC:
            short_mwh = frac * float(np.nansum(np.abs(inp.ts[asked].to_numpy(dtype=float)))) * inp.dt_h
            found[served] = {"unserved_frac": frac, "warning": (
                f"{eid} was served {100 * frac:.1f} % less energy than its p_mw asked ({short_mwh:.3g} MWh), so "
                f"{eid}.p_mw (the setpoint) overstates what the grid carried ({served}): on OpenDSS its bus fell below "
                "the element's vmin_pu (0.95 pu unless set) and it was served as an impedance (lower the load, support "
                "the voltage, or set vmin_pu lower if a constant-power draw is meant); on ANDES a load draws as an "
                "impedance set at each step's start voltage, and a native PERC1's ceased share is not served")}
    for col in _columns(list(inp.ts.columns), inp.roles):
        if col.partition(".")[0] in elements:  # judged above
            continue
        if col.partition(".")[0] in grids:
            x = np.asarray(inp.ts[col], dtype=float)
            low_s = collapse_s(x, inp.dt_h * 3600.0)
            if low_s >= COLLAPSE_S:
                vm = float(np.nanmin(x))
                found[col] = {"collapse_s": low_s, "vm_min_pu": vm, "warning": (
                    f"{col} was below {COLLAPSE_PU:g} pu for {low_s:g} s (lowest {vm:.3g} pu): the network collapsed "
                    "under what it was given; a power flow that converges there serves loads as impedances "
                    "(OpenDSS below vminpu), so their power was not delivered; smaller loads, another bus, or "
                    "voltage support")}
            continue
        if fed is not None and col not in fed:
            continue
        try:
            x = np.asarray(inp.ts[col], dtype=float)
        except (TypeError, ValueError):
            continue
        chat, floor = chatter_frac(x), floor_frac(x)
        texts = []
        if chat >= CHATTER_FRAC:
            texts.append(f"{col} swings between its limits ({np.nanmin(x):g} .. {np.nanmax(x):g}) at "
                         f"{100 * chat:.0f} % of the steps: the loop cannot settle at this step (loop gain "
                         "above 1); lower the gain (a wider full-output error), a deadband, or a shorter step")
        if floor >= FLOOR_FRAC:
            texts.append(f"{col} sits at its floor ({np.nanmin(x):g}) for {100 * floor:.0f} % of the run: the "
                         "controller has no authority left, and what it controls is no longer controlled by it")
        if texts:
            found[col] = {"chatter_frac": finite(chat), "floor_frac": finite(floor), "warning": "; ".join(texts)}
    return {"guards": found} if found else {}


def run_warnings(kpis: dict[str, Any]) -> list[str]:
    """The guards' texts of a run's KPIs (for ``metadata.json`` "warnings")."""
    return [f"after the run: {v['warning']}" for v in (kpis.get("guards") or {}).values()
            if isinstance(v, dict) and v.get("warning")]


BLOCK = Block("guards", "Guards (controllers chattering or saturated, grids collapsed, loads not served)", 99, _columns, _compute,
              headline=("chatter_frac", "floor_frac", "collapse_s", "unserved_frac"))
