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
a 60 s window (the "dynamic power range"), ``rms_mw`` = the standard deviation of P,
``ramp_step_max_mw_s`` = the largest change over one record step divided by it.

The power-swing energy is the variance of the detrended P, which by Parseval equals the integral of
S(f) over 0..fs/2 (Welch's density is normalised so, to its leakage); the share of it in a band is

    band_share_frac          = Σ S(f) over the bins in [lo, min(hi, fs/2)] / Σ S(f) over all bins
                               (default 0.1-20 Hz, the band interconnection specs cap; the band a record
                               cannot show above its Nyquist frequency fs/2 does not count, and
                               share_low_hz/share_high_hz say which part did)
    band_share_0p2_3hz_frac  = the same for 0.2-3 Hz, where synchronous training swings (Choukse et al.)

(null for a flat P, whose standard deviation is below 1e-9 of max(|mean P|, 1 MW): round-off has no
band). The share is a ratio: a mitigation that shrinks a swing but leaves it at the same frequency
lowers band_rms_mw, not the share.

With ``[kpis.swing] spec = { band_hz = [lo, hi], max_band_share_frac = x, max_ramp_mw_s = r }`` each
column also gets ``spec_band_share_frac`` (its share in the spec band), ``spec_band_ok`` and
``spec_ramp_ok`` (booleans; absent for a limit not given), and the block a ``swing_spec`` summary:
``ok`` (every column within every limit), ``n_columns``, ``n_columns_failing`` and ``failing`` (entity ids).
Validation refuses a spec band the record cannot show (cosim/scenario/validate.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import signal

from cosim.kpis._block import Block, KpiInput, ending, finite
from cosim.roles import RunRoles
from cosim.scenario.schema import (
    SWING_BAND_HZ,
    SWING_MAX_STEP_S,
    SWING_MIN_RECORD_S,
    SWING_SHARE_BAND_HZ,
    SWING_WINDOW_S,
)

BAND_HZ = SWING_BAND_HZ  # the default; a scenario sets its own in [kpis.swing] band_hz
SHARE_BAND_HZ = SWING_SHARE_BAND_HZ  # the band of band_share_frac (a spec's own band gives spec_band_share_frac)
TRAINING_BAND_HZ = (0.2, 3.0)  # where synchronous training swings (Choukse et al., arXiv 2508.14318) [Hz]
MAX_STEP_S = SWING_MAX_STEP_S
WINDOW_S = SWING_WINDOW_S
#: a standard deviation below this share of |mean P| (or of 1 MW) is round-off, not a swing to share out [-]
FLAT_FRAC = 1e-9


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


def band_share(p: np.ndarray, dt_s: float, band_hz: tuple[float, float] = SHARE_BAND_HZ) -> tuple[float, float, float]:
    """``(share of the swing energy in the band [-], low edge counted [Hz], high edge counted [Hz])`` of ``p`` [MW].

    The swing energy is Σ S(f) Δf over every Welch bin (the variance of the detrended ``p``, Parseval); the
    band's part sums the bins in ``[low, min(high, fs/2)]``. NaN for a flat ``p`` (no swing to share).
    """
    freqs, psd = welch_psd(p, dt_s)
    high = min(float(band_hz[1]), 0.5 / dt_s)
    total = float(np.sum(psd))
    inside = (freqs >= band_hz[0]) & (freqs <= high)
    if not total > 0 or not inside.any() or is_flat(p):
        return float("nan"), float(band_hz[0]), high
    return float(np.sum(psd[inside]) / total), float(band_hz[0]), high


def is_flat(p: np.ndarray) -> bool:
    """Whether ``p`` [MW] has no swing beyond round-off (:data:`FLAT_FRAC`)."""
    return bool(np.std(p) <= FLAT_FRAC * max(1.0, abs(float(np.mean(p)))))


def swing_energy_mw2(p: np.ndarray, dt_s: float) -> float:
    """The integral of the one-sided Welch PSD over 0..fs/2 (≈ the variance of ``p``, Parseval). [MW²]"""
    freqs, psd = welch_psd(p, dt_s)
    return float(np.sum(psd) * (freqs[1] - freqs[0])) if len(freqs) > 1 else 0.0


def swing_kpis(p: np.ndarray, dt_s: float, band_hz: tuple[float, float] = BAND_HZ,
               share_band_hz: tuple[float, float] = SHARE_BAND_HZ) -> dict[str, Any]:
    lag = max(1, int(round(1.0 / dt_s)))
    out: dict[str, Any] = {"rms_mw": finite(np.std(p))}
    if len(p) > lag:
        out["ramp_max_mw_s"] = finite(np.max(np.abs(p[lag:] - p[:-lag])) / (lag * dt_s))
    if len(p) > 1:
        out["ramp_step_max_mw_s"] = finite(np.max(np.abs(np.diff(p))) / dt_s)
    share, low, high = band_share(p, dt_s, share_band_hz)
    out.update({"band_share_frac": finite(share), "share_low_hz": finite(low), "share_high_hz": finite(high),
                "band_share_0p2_3hz_frac": finite(band_share(p, dt_s, TRAINING_BAND_HZ)[0])})
    window = max(1, int(round(60.0 / dt_s)))
    roll = pd.Series(p).rolling(min(window, len(p)))
    out["range_1min_mw"] = finite(float((roll.max() - roll.min()).max()))
    rms, peak = band_rms(p, dt_s, band_hz)
    out.update({"band_rms_mw": finite(rms), "band_peak_hz": finite(peak),
                "band_low_hz": float(band_hz[0]), "band_high_hz": float(band_hz[1])})
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    dt_s = inp.dt_h * 3600.0
    if dt_s > MAX_STEP_S + 1e-9 or len(inp.ts) < SWING_MIN_RECORD_S / dt_s:  # under 4 s: nothing in the band
        return {}
    params = inp.params.get("swing", {})
    band = tuple(params.get("band_hz", BAND_HZ))
    spec = params.get("spec") or {}
    checked = spec.get("max_band_share_frac") is not None or spec.get("max_ramp_mw_s") is not None
    share_band = tuple(spec.get("band_hz", SHARE_BAND_HZ)) if checked else SHARE_BAND_HZ
    found = {}
    for column in ending(inp.ts.columns, ".p_mw"):
        p = inp.ts[column].to_numpy(float)
        if np.isfinite(p).all():
            found[column.partition(".")[0]] = entry = swing_kpis(p, dt_s, band, SHARE_BAND_HZ)
            if checked:
                entry.update(spec_check(entry, p, dt_s, spec, share_band))
    if not found:
        return {}
    return {"swing": found, "swing_spec": spec_summary(found)} if checked else {"swing": found}


def spec_check(entry: dict[str, Any], p: np.ndarray, dt_s: float, spec: dict[str, Any],
               band_hz: tuple[float, float]) -> dict[str, Any]:
    """The spec's verdicts on one column: its share in the spec band and ``spec_band_ok``/``spec_ramp_ok``
    (None when the value is missing: too short a record)."""
    share = finite(band_share(p, dt_s, band_hz)[0]) if band_hz != SHARE_BAND_HZ else entry["band_share_frac"]
    out: dict[str, Any] = {"spec_band_share_frac": share}
    limit = spec.get("max_band_share_frac")
    if limit is not None:
        # a flat P has no swing: nothing in any band, within every share limit
        out["spec_band_ok"] = True if share is None and is_flat(p) else (
            None if share is None else bool(share <= limit))
    ramp, ramp_limit = entry.get("ramp_max_mw_s"), spec.get("max_ramp_mw_s")
    if ramp_limit is not None:
        out["spec_ramp_ok"] = None if ramp is None else bool(ramp <= ramp_limit)
    return out


def spec_summary(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The spec over every column: ``ok`` (all verdicts true), the columns checked and the failing ones."""
    verdicts = {eid: [v for k, v in entry.items() if k.startswith("spec_") and k.endswith("_ok")]
                for eid, entry in found.items()}
    failing = sorted(eid for eid, v in verdicts.items() if any(x is False for x in v))
    unknown = any(x is None for v in verdicts.values() for x in v)
    return {"ok": None if unknown and not failing else not failing, "n_columns": len(found),
            "n_columns_failing": len(failing), "failing": failing}


BLOCK = Block("swing", "Power swings (sub-second)", 90, _columns, _compute,
              headline=("band_rms_mw", "band_peak_hz", "ramp_max_mw_s", "range_1min_mw", "band_share_frac"))
