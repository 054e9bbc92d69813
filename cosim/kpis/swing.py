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
Validation refuses a spec band the record cannot show (:func:`check`, run on the scenario's table).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field
from scipy import signal

from cosim.errors import Problem
from cosim.kpis._block import BandHz, Block, KpiInput, KpiParams, ParamsContext, ending, finite
from cosim.roles import RunRoles

#: The default band: the electromechanical band, inter-area modes ~0.1-1 Hz and local modes ~1-2 Hz;
#: a scenario sets its own in [kpis.swing] band_hz. [Hz]
BAND_HZ = (0.1, 2.0)
#: The band of band_share_frac and a spec's default band: the 0.1-20 Hz oscillation band large-load
#: interconnection specs cap (Choukse et al., arXiv 2508.14318; a spec's own band gives spec_band_share_frac). [Hz]
SHARE_BAND_HZ = (0.1, 20.0)
TRAINING_BAND_HZ = (0.2, 3.0)  # where synchronous training swings (Choukse et al., arXiv 2508.14318) [Hz]
#: The longest record step read (the spectrum needs sub-second samples). [s]
MAX_STEP_S = 0.5
#: The shortest record read (4 s: two periods of the slowest screened swing, 0.5 Hz). [s]
MIN_RECORD_S = 4.0
#: The Welch window: the spectrum resolves frequencies down to 1 / min(window, run). [s]
WINDOW_S = 64.0


class SwingLimits(KpiParams):
    """``[kpis.swing] spec = {...}``: a utility's oscillation limits, checked on every recorded ``p_mw``.

    Attributes:
        band_hz: the band whose share of the power-swing energy is capped. [Hz]
        max_band_share_frac: the largest share of the swing energy (variance of P) allowed in the
            band; None = not checked. [-]
        max_ramp_mw_s: the largest change of P over one second allowed (``ramp_max_mw_s``);
            None = not checked. [MW/s]
    """

    band_hz: BandHz = SHARE_BAND_HZ
    max_band_share_frac: float | None = Field(default=None, ge=0, le=1)
    max_ramp_mw_s: float | None = Field(default=None, gt=0)

    @property
    def checks(self) -> bool:
        """Whether any limit is set (a spec without one checks nothing)."""
        return self.max_band_share_frac is not None or self.max_ramp_mw_s is not None


class SwingParams(KpiParams):
    """``[kpis.swing]``: the band of the power-swing screening (``band_rms_mw``, ``band_peak_hz``) and
    an optional interconnection ``spec`` (:class:`SwingLimits`; no limit set = no check)."""

    band_hz: BandHz = BAND_HZ
    spec: SwingLimits = SwingLimits()


def check(params: SwingParams, ctx: ParamsContext) -> tuple[SwingParams, list[Problem]]:
    """A band the recording cannot show is said (a warning: the run is still useful); a ``spec``
    it cannot check is a problem: a pass/fail read off a band the record does not show (above its
    Nyquist frequency, below its spectral resolution) would be unfounded."""
    problems: list[Problem] = []
    dt_s = ctx.record_step_s
    if dt_s is None or ctx.duration_s is None:
        return params, problems  # the timing problems are reported elsewhere
    low, high = params.band_hz
    if dt_s > MAX_STEP_S + 1e-9:
        ctx.warnings.append(f"{ctx.where}.band_hz = [{low:g}, {high:g}]: no effect, the swing KPI needs a record step "
                            f"<= {MAX_STEP_S:g} s and this run records every {dt_s:g} s")
    elif high > 0.5 / dt_s:
        ctx.warnings.append(f"{ctx.where}.band_hz = [{low:g}, {high:g}]: above {0.5 / dt_s:g} Hz, the highest "
                            f"frequency a {dt_s:g} s record shows; the band is read only up to it (record faster, or "
                            "lower high_hz)")
    if "spec" in params.model_fields_set:
        problems.extend(_check_spec(params.spec, ctx, dt_s, ctx.duration_s))
    return params, problems


def _check_spec(spec: SwingLimits, ctx: ParamsContext, dt_s: float, duration_s: float) -> list[Problem]:
    where = f"{ctx.where}.spec"
    if not spec.checks:
        return [Problem(where, "sets no limit, so it checks nothing; give max_band_share_frac and/or "
                        "max_ramp_mw_s, e.g. spec = { band_hz = [0.1, 20.0], max_band_share_frac = 0.2 }")]
    high = spec.band_hz[1]
    if dt_s > MAX_STEP_S + 1e-9:
        return [Problem(where, f"the swing KPI reads only records at <= {MAX_STEP_S:g} s and this run "
                        f"records every {dt_s:g} s, so nothing would be checked; set [record] step_s "
                        f"(and the sims' step_s) to {min(MAX_STEP_S, 0.5 / high):g} s or less")]
    if duration_s < MIN_RECORD_S:
        return [Problem(where, f"the swing KPI needs at least {MIN_RECORD_S:g} s of record and this run "
                        f"lasts {duration_s:g} s, so nothing would be checked; lengthen duration_s")]
    if spec.max_band_share_frac is None:
        return []  # only the ramp is checked: any band will do
    return _check_spec_band(f"{where}.band_hz", dt_s, duration_s, spec.band_hz)


def _check_spec_band(where: str, dt_s: float, duration_s: float, band_hz: tuple[float, float]) -> list[Problem]:
    """The spec band within what the record shows: up to its Nyquist frequency, down to its resolution."""
    low, high = band_hz
    shown, problems = [low, high], []
    nyquist_hz = 0.5 / dt_s
    resolution_hz = 1.0 / min(WINDOW_S, float(duration_s))
    if high > nyquist_hz + 1e-12:
        problems.append(Problem(where, f"reaches above {nyquist_hz:g} Hz, the Nyquist frequency of this run's "
                                f"{dt_s:g} s record step; record at {0.5 / high:g} s or less ([record] step_s and the "
                                f"sims' step_s), or lower the band to [{low:g}, {nyquist_hz:g}]", shown))
    if low < resolution_hz - 1e-12:
        # the Welch window caps at WINDOW_S: a longer run resolves down to 1 / window, no further
        longer = (f", or run for {1.0 / low:g} s or longer" if low >= 1.0 / WINDOW_S - 1e-12 else "")
        problems.append(Problem(where, f"starts below {resolution_hz:g} Hz, the spectral resolution of this run "
                                f"(1 / min({WINDOW_S:g} s Welch window, duration_s)); raise low_hz to "
                                f"{resolution_hz:g} or more{longer}", shown))
    return problems
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
    if dt_s > MAX_STEP_S + 1e-9 or len(inp.ts) < MIN_RECORD_S / dt_s:  # under 4 s: nothing in the band
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
              headline=("band_rms_mw", "band_peak_hz", "ramp_max_mw_s", "range_1min_mw", "band_share_frac"),
              params=SwingParams, check=check)
