"""Forced-oscillation KPI block (cosim/kpis/resonance.py) on synthetic machine frequencies whose swing is known.

Analytic reference: a sinusoid of amplitude A sampled at its peaks has half peak-to-peak A. Over N
samples of whole periods of M samples each, the least-squares line fitted to it reaches at most
±3 A / ((N + 1) sin(π / M)) (≈ 3 A / (π n) over n periods) at the window's ends, and a line of
range ±e moves the half peak-to-peak by at most e; a sinusoid sampled symmetrically about the
window's centre has a zero line (the pairs cancel), so its half peak-to-peak is A exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim import kpis
from cosim.kpis.resonance import BLOCK, dominant_hz, swing_amplitude
from cosim.roles import RunRoles

ROLES = RunRoles({"net": "grid"})


def _frame(step_s: float, **columns) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    index = pd.date_range("2024-07-15T12:00:00Z", periods=n, freq=pd.Timedelta(seconds=step_s))
    return pd.DataFrame(columns, index=index)


def _t(duration_s: float, step_s: float) -> np.ndarray:
    return np.arange(round(duration_s / step_s)) * step_s


@pytest.mark.parametrize("phase_samples", [0, 3, 5, 8])
def test_a_sinusoid_gives_its_amplitude_within_the_detrending_bound(phase_samples):
    m, n_samples = 20, 600                   # 30 whole periods of 0.5 Hz at 0.1 s, peaks on samples
    k = np.arange(n_samples)
    a_hz = 5e-3
    amp = swing_amplitude(60.0 + a_hz * np.sin(2 * np.pi * (k + phase_samples) / m))
    bound = 3 * a_hz / ((n_samples + 1) * np.sin(np.pi / m))
    assert abs(amp - a_hz) <= bound + 1e-12
    assert bound == pytest.approx(3 * a_hz / (np.pi * 30), rel=0.01)


def test_a_line_and_a_constant_have_no_swing():
    t = np.arange(0.0, 60.0, 0.1)
    assert swing_amplitude(60.0 + 1e-3 * t) == pytest.approx(0.0, abs=1e-12)
    assert swing_amplitude(np.full(50, 59.98)) == pytest.approx(0.0, abs=1e-12)


def test_block_finds_the_largest_machine_swing_its_frequency_and_the_swing_between_machines():
    step_s = 0.1
    t = _t(120.1, step_s)                    # settled window: 60 ... 120 s, 601 samples, centred on 90 s
    wave = np.cos(2 * np.pi * 0.5 * (t - 90.0))  # symmetric about the centre: no line to remove
    common = 1e-3 * wave
    drift = -2e-5 * t                        # the common frequency drifts (no governor)
    g1 = 60.0 + drift + common + 4e-3 * wave
    g2 = 60.0 + drift + common - 0.5e-3 * wave
    coi = 60.0 + drift + common
    frame = _frame(step_s, **{"net.gen_genrou_1_f_hz": g1, "net.gen_genrou_2_f_hz": g2, "net.f_hz": coi,
                              "net.f_nadir_hz": coi, "other.p_mw": np.ones(len(t))})
    out = kpis.compute(frame, step_s, ROLES)["resonance"]
    assert list(out) == ["net"]
    net = out["net"]
    assert net["f_osc_amp_max_hz"] == pytest.approx(5e-3, rel=1e-6)
    assert net["f_osc_gen"] == "genrou_1"
    assert net["osc_freq_hz"] == pytest.approx(0.5, abs=1 / 60.1)  # the periodogram resolution
    assert net["f_osc_rel_amp_max_hz"] == pytest.approx(4e-3, rel=1e-6)
    assert net["f_osc_coi_amp_hz"] == pytest.approx(1e-3, rel=1e-6)
    assert net["window_s"] == pytest.approx(60.1) and net["n_machines"] == 2


def test_dominant_frequency_of_a_square_wave_is_its_fundamental():
    t = np.arange(0.0, 64.0, 0.1)
    square = np.where((t / 1.6) % 1.0 < 0.7, 1.0, -2.0)
    assert dominant_hz(square, 0.1) == pytest.approx(1 / 1.6, abs=1 / 64.0)


def test_no_block_at_coarse_steps_short_records_or_without_machine_frequencies():
    t = _t(600.0, 1.0)
    coarse = _frame(1.0, **{"net.gen_genrou_1_f_hz": 60.0 + 1e-3 * np.sin(0.3 * t)})
    assert BLOCK.compute(kpis.KpiInput(coarse, 1.0 / 3600.0, 1.0, ROLES)) == {}
    short = _frame(0.1, **{"net.gen_genrou_1_f_hz": np.full(10, 60.0)})
    assert BLOCK.compute(kpis.KpiInput(short, 0.1 / 3600.0, 0.1, ROLES)) == {}
    assert "resonance" not in kpis.compute(_frame(0.1, **{"net.f_hz": np.full(100, 60.0)}), 0.1, ROLES)
    assert BLOCK.columns(["net.gen_f_hz", "net.gen_genrou_1_f_hz", "net.f_hz", "net.gen_genrou_1_p_mw"], ROLES) == [
        "net.gen_genrou_1_f_hz", "net.f_hz"]
