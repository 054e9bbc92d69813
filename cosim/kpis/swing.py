"""Power-swing screening of sub-second power series: band energy, ramps, dynamic range.

For every recorded ``p_mw`` column when the recording step is at most 0.5 s (a Nyquist
frequency of at least 1 Hz; at coarser steps the block is empty): with P(t) detrended (its mean
removed) and sampled at fs = 1/Δt, the one-sided Welch power spectral density S(f)
(``scipy.signal.welch``, Hann windows of up to 64 s, half overlap) and

    band_rms_mw  = sqrt(∫ S(f) df over the band)     by default 0.1-2 Hz, the electromechanical band
                                                     (inter-area modes ~0.1-1 Hz, local modes ~1-2 Hz);
                                                     a scenario sets its own: [kpis.swing] band_hz = [lo, hi]
    band_peak_hz = the frequency of the largest S(f) in that band (band_low_hz/band_high_hz say which)

(the screening of /work/notes/frequency.md §6.2; utilities state such limits as oscillation
magnitudes in bands, Choukse et al., arXiv 2508.14318), ``ramp_max_mw_s`` = the largest change of
P over one second divided by that second, and ``range_1min_mw`` = the largest max − min of P in
a 60 s window (the "dynamic power range"), ``rms_mw`` = the standard deviation of P.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import signal

from cosim.kpis._block import Block, KpiInput, ending, finite
from cosim.roles import RunRoles
from cosim.scenario.schema import SWING_BAND_HZ, SWING_MAX_STEP_S

BAND_HZ = SWING_BAND_HZ  # the default; a scenario sets its own in [kpis.swing] band_hz
MAX_STEP_S = SWING_MAX_STEP_S
WINDOW_S = 64.0


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    return ending(columns, ".p_mw")


def welch_psd(p: np.ndarray, dt_s: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Welch PSD of ``p`` [MW] sampled every ``dt_s``: ``(f [Hz], S [MW²/Hz])``."""
    x = np.asarray(p, float) - np.mean(p)
    nper = min(len(x), int(round(WINDOW_S / dt_s)))
    return signal.welch(x, fs=1.0 / dt_s, window="hann", nperseg=nper, detrend="constant")


def band_rms(p: np.ndarray, dt_s: float, band_hz: tuple[float, float] = BAND_HZ) -> tuple[float, float]:
    """``(rms in the band [MW], frequency of the band's spectral peak [Hz])`` of ``p`` [MW]."""
    freqs, psd = welch_psd(p, dt_s)
    inside = (freqs >= band_hz[0]) & (freqs <= band_hz[1])
    if inside.sum() < 2:
        return float("nan"), float("nan")
    energy = float(np.trapezoid(psd[inside], freqs[inside]))
    return float(np.sqrt(max(energy, 0.0))), float(freqs[inside][np.argmax(psd[inside])])


def swing_kpis(p: np.ndarray, dt_s: float, band_hz: tuple[float, float] = BAND_HZ) -> dict[str, Any]:
    lag = max(1, int(round(1.0 / dt_s)))
    out: dict[str, Any] = {"rms_mw": finite(np.std(p))}
    if len(p) > lag:
        out["ramp_max_mw_s"] = finite(np.max(np.abs(p[lag:] - p[:-lag])) / (lag * dt_s))
    window = max(1, int(round(60.0 / dt_s)))
    roll = pd.Series(p).rolling(min(window, len(p)))
    out["range_1min_mw"] = finite(float((roll.max() - roll.min()).max()))
    rms, peak = band_rms(p, dt_s, band_hz)
    out.update({"band_rms_mw": finite(rms), "band_peak_hz": finite(peak),
                "band_low_hz": float(band_hz[0]), "band_high_hz": float(band_hz[1])})
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    dt_s = inp.dt_h * 3600.0
    if dt_s > MAX_STEP_S + 1e-9 or len(inp.ts) < 4 / dt_s:  # under 4 s of samples: nothing in the band
        return {}
    band = tuple(inp.params.get("swing", {}).get("band_hz", BAND_HZ))
    found = {}
    for column in ending(inp.ts.columns, ".p_mw"):
        p = inp.ts[column].to_numpy(float)
        if np.isfinite(p).all():
            found[column.partition(".")[0]] = swing_kpis(p, dt_s, band)
    return {"swing": found} if found else {}


BLOCK = Block("swing", "Power swings (sub-second)", 90, _columns, _compute,
              headline=("band_rms_mw", "band_peak_hz", "ramp_max_mw_s", "range_1min_mw"))
