"""Forced oscillation of the machines: how far each generator's frequency swings under a periodic load.

For every entity that records per-machine frequencies ``gen_<id>_f_hz`` (the ``Grid`` of
adapters/andes_grid/) at a step of at most 0.5 s, over the *settled window* (the second half
of the record: a forced response has settled once the transient of switching the forcing on has
decayed, ~1 / (ζ ω) = 4.5 s for a 0.62 Hz mode at 5.7 % damping):

    f_osc_amp_max_hz      = max over machines of (max − min) / 2 of f_g(t), its linear trend removed
    f_osc_gen             = the machine of that largest swing (its id from the column name)
    osc_freq_hz           = the frequency of the largest periodogram bin of that machine's swing
                            (resolution 1 / window_s)
    f_osc_rel_amp_max_hz  = the same as f_osc_amp_max_hz for f_g(t) − f(t), f the entity's own
                            ``f_hz`` (the centre-of-inertia frequency): the swing between machines,
                            without the common one (only when ``f_hz`` is recorded)
    f_osc_coi_amp_hz      = the same for f(t) alone (the common swing)
    window_s, n_machines

The linear trend is removed because with the machines' governors off (a lightly damped study)
nothing holds the common frequency: a small mismatch between the initial and the mean power makes
it drift, and a drift is not an oscillation. For a sinusoid of amplitude A over n whole periods
(N samples, M a period) the least-squares line it removes reaches at most ±3 A / ((N + 1) sin(π / M))
≈ ±3 A / (π n) at the window's ends, which bounds what the detrending moves the amplitude by (3 %
at n = 30; tests/cosim/test_kpis_resonance.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim.kpis._block import Block, KpiInput, finite
from cosim.roles import RunRoles

PREFIX, SUFFIX = "gen_", "_f_hz"
#: The longest record step read: a 0.1-2 Hz swing needs sub-second samples. [s]
MAX_STEP_S = 0.5
#: The fewest samples in the settled window. [-]
MIN_SAMPLES = 8


def _gen_columns(columns) -> dict[str, list[str]]:
    """entity -> its ``gen_<id>_f_hz`` columns, in recorded order."""
    found: dict[str, list[str]] = {}
    for column in columns:
        entity, _, attr = column.rpartition(".")
        if entity and attr.startswith(PREFIX) and attr.endswith(SUFFIX) and len(attr) > len(PREFIX + SUFFIX):
            found.setdefault(entity, []).append(column)
    return found


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    gens = _gen_columns(columns)
    return [*(c for cols in gens.values() for c in cols), *(f"{e}.f_hz" for e in gens if f"{e}.f_hz" in names)]


def swing_amplitude(x: np.ndarray) -> float:
    """Half the peak-to-peak of ``x`` with its least-squares line removed. [unit of x]"""
    x = np.asarray(x, float)
    t = np.arange(len(x), dtype=float)
    slope, intercept = np.polyfit(t, x, 1)
    rest = x - (slope * t + intercept)
    return float(rest.max() - rest.min()) / 2.0


def dominant_hz(x: np.ndarray, dt_s: float) -> float:
    """The frequency of the largest periodogram bin of ``x`` detrended (the zero bin excluded). [Hz]"""
    x = np.asarray(x, float)
    t = np.arange(len(x), dtype=float)
    rest = x - np.polyval(np.polyfit(t, x, 1), t)
    spectrum = np.abs(np.fft.rfft(rest))
    return float(np.fft.rfftfreq(len(x), dt_s)[1 + int(np.argmax(spectrum[1:]))])


def entity_kpis(inp: KpiInput, entity: str, gen_columns: list[str]) -> dict[str, Any]:
    dt_s = inp.dt_h * 3600.0
    window = inp.ts.iloc[len(inp.ts) // 2:]
    if dt_s > MAX_STEP_S + 1e-9 or len(window) < MIN_SAMPLES or window[gen_columns].isna().any().any():
        return {}
    amps = {c: swing_amplitude(window[c].to_numpy(float)) for c in gen_columns}
    worst = max(amps, key=amps.get)
    out: dict[str, Any] = {
        "f_osc_amp_max_hz": finite(amps[worst]),
        "f_osc_gen": worst.rpartition(".")[2][len(PREFIX):-len(SUFFIX)],
        "osc_freq_hz": finite(dominant_hz(window[worst].to_numpy(float), dt_s)),
    }
    coi = inp.col(entity, "f_hz")
    if coi is not None and window[coi].notna().all():
        f_coi = window[coi].to_numpy(float)
        out["f_osc_rel_amp_max_hz"] = finite(max(swing_amplitude(window[c].to_numpy(float) - f_coi)
                                                 for c in gen_columns))
        out["f_osc_coi_amp_hz"] = finite(swing_amplitude(f_coi))
    out["window_s"] = finite(len(window) * dt_s)
    out["n_machines"] = len(gen_columns)
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    found = {e: entity_kpis(inp, e, cols) for e, cols in _gen_columns(inp.ts.columns).items()}
    found = {e: v for e, v in found.items() if v}
    return {"resonance": found} if found else {}


BLOCK = Block("resonance", "Forced oscillation of the machines", 82, _columns, _compute,
              headline=("f_osc_amp_max_hz", "f_osc_gen", "osc_freq_hz", "f_osc_rel_amp_max_hz"))
