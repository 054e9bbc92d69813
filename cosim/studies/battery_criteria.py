"""The battery's criteria: pure functions of the point-of-connection channels (no runs, no files).

:func:`poc_channels` turns a run's recorded time series into ``t_s, p_mw, q_mvar, v_pu, f_hz,
n_trips`` at the point of connection; :func:`drift_verdict` (flat start) and
:func:`ride_through_verdict` (every disturbance) judge them against :class:`Tolerances`, cosim's
thresholds (``cosim/studies/battery.py`` states why each is what it is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: the entity the battery adds to impose a disturbance (adapters/poc_events.py)
DIST_ENTITY = "battery_poc_events"

@dataclass(frozen=True)
class Tolerances:
    """The battery's thresholds (cosim's; :data:`TESTS` says why)."""

    drift_frac: float = 0.01
    drift_v_pu: float = 0.005
    drift_f_hz: float = 0.01
    recover_frac: float = 0.9
    recover_s: float = 5.0


def poc_channels(ts: pd.DataFrame, poc: str, ride_through: str | None) -> pd.DataFrame:
    """P, Q, V and f at the point of connection (``t_s`` from the start) and the transfers so far.

    V is, where a disturbance is imposed, the voltage the ride-through entity acted on
    (``vm_acted_pu``; else the bus voltage times the factor ``battery_poc_events.vm_sag_pu``); f the
    imposed frequency where a frequency event was imposed, else the element's, else the grid's."""
    def col(name: str) -> pd.Series | None:
        return ts[name].astype(float) if name in ts.columns else None

    t_s = (ts.index - ts.index[0]).total_seconds() if isinstance(ts.index, pd.DatetimeIndex) else np.arange(len(ts))
    v = col(f"{poc}.vm_pu")
    v = v if v is not None else col(f"{poc}.v1_pu")
    factor = col(f"{DIST_ENTITY}.vm_sag_pu")
    acted = col(f"{ride_through}.vm_acted_pu") if ride_through else None
    if factor is not None:  # imposed: the voltage the campus acted on (bus voltage times the factor)
        v = acted if acted is not None else (v * factor if v is not None else None)
    f = col(f"{DIST_ENTITY}.f_hz")
    if f is not None and not (f != f.iloc[0]).any():  # no frequency event imposed: the grid's frequency
        f = None
    if f is None:
        f = col(f"{poc}.f_hz")
    if f is None:
        grid_f = [c for c in ts.columns if c.endswith(".f_hz")]
        f = col(grid_f[0]) if grid_f else None
    trips = col(f"{ride_through}.n_trips") if ride_through else None
    nan = pd.Series(np.nan, index=ts.index)
    out = pd.DataFrame({"t_s": np.asarray(t_s, dtype=float),
                        "p_mw": (col(f"{poc}.p_mw") if col(f"{poc}.p_mw") is not None else nan).to_numpy(),
                        "q_mvar": (col(f"{poc}.q_mvar") if col(f"{poc}.q_mvar") is not None else nan).to_numpy(),
                        "v_pu": (v if v is not None else nan).to_numpy(),
                        "f_hz": (f if f is not None else nan).to_numpy(),
                        "n_trips": (trips if trips is not None else pd.Series(0.0, index=ts.index)).to_numpy()})
    return out


def drift_verdict(ch: pd.DataFrame, tol: Tolerances) -> tuple[bool, str]:
    """Flat start: every channel's drift (max - min after the first step) below its tolerance."""
    rest = ch.iloc[1:] if len(ch) > 1 else ch
    s0 = math.hypot(float(ch["p_mw"].iloc[0]), float(ch["q_mvar"].iloc[0]))
    limits = {"p_mw": tol.drift_frac * s0, "q_mvar": tol.drift_frac * s0, "v_pu": tol.drift_v_pu,
              "f_hz": tol.drift_f_hz}
    passed, parts = True, []
    for name, limit in limits.items():
        values = rest[name].to_numpy(float)
        values = values[np.isfinite(values)]
        if name == "f_hz" and not len(values):  # a stiff source records no frequency: it is the nominal
            parts.append("f_hz not recorded (a stiff source: nominal)")
            continue
        drift = float(values.max() - values.min()) if len(values) else math.nan
        ok = math.isfinite(drift) and drift <= limit + 1e-12
        passed &= ok
        parts.append(f"{name} drift {drift:.4g} (limit {limit:.4g})")
    return passed, "; ".join(parts)


def ride_through_verdict(ch: pd.DataFrame, t_event_s: float, t_clear_s: float, tol: Tolerances,
                         at_end: bool = False) -> tuple[bool, str]:
    """No transfer to backup after ``t_event_s``, and P back to ``recover_frac`` of its pre-event mean
    within ``recover_s`` of ``t_clear_s`` (``at_end``: P at the last step instead)."""
    t = ch["t_s"].to_numpy(float)
    p = ch["p_mw"].to_numpy(float)
    pre = p[t < t_event_s - 1e-9]
    p_pre = float(np.nanmean(pre)) if len(pre) else float(p[0])
    trips = ch["n_trips"].to_numpy(float)
    before = trips[t < t_event_s - 1e-9]
    n0 = float(before[-1]) if len(before) else float(trips[0])
    transfers = int(np.nanmax(trips) - n0) if len(trips) else 0
    target = tol.recover_frac * p_pre
    if at_end:
        recovered, when = bool(p[-1] >= target - 1e-9), "at the end"
        got = float(p[-1])
    else:
        window = (t >= t_clear_s - 1e-9) & (t <= t_clear_s + tol.recover_s + 1e-9)
        got = float(np.nanmax(p[window])) if window.any() else math.nan
        recovered = bool(window.any() and got >= target - 1e-9)
        when = f"within {tol.recover_s:g} s of {t_clear_s:g} s"
    passed = transfers == 0 and recovered
    text = (f"transfers to backup {transfers}; P before {p_pre:.4g} MW, best {when} {got:.4g} MW "
            f"(needs {target:.4g}); V {_span(ch['v_pu'], 'pu')}; f {_span(ch['f_hz'], 'Hz')}")
    return passed, text


def _span(values: pd.Series, unit: str) -> str:
    finite = values.to_numpy(float)
    finite = finite[np.isfinite(finite)]
    return f"min {finite.min():.4g} max {finite.max():.4g} {unit}" if len(finite) else "not recorded"
