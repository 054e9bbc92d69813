"""The swing-energy shares and the interconnection spec check of cosim/kpis/swing.py.

Analytic references (Parseval: the variance of a detrended signal is the integral of its one-sided PSD
over 0..fs/2): a sinusoid puts all its energy at its frequency, so a 0.5 Hz sine on a constant is ~100 %
in 0.2-3 Hz and a 0.05 Hz sine ~0 % in 0.1-20 Hz; white noise has a flat PSD, so a band holds
(width / Nyquist frequency) of its energy. The 0.1-20 Hz band and share limits are the shape of the
large-load specs Choukse et al. (arXiv 2508.14318) describe ("<= 20 % of the power-swing energy").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import cosim
from cosim import kpis
from cosim.errors import ScenarioError
from cosim.kpis.swing import band_share, swing_energy_mw2, swing_kpis
from cosim.roles import RunRoles
from cosim.scenario import load_scenario

ROLES = RunRoles({"site": "load"})


def _t(duration_s: float, dt_s: float) -> np.ndarray:
    return np.arange(int(round(duration_s / dt_s))) * dt_s


def test_a_sine_in_the_training_band_is_all_in_it():
    dt_s = 0.025
    t = _t(600, dt_s)
    p = 10 + 2 * np.sin(2 * math.pi * 0.5 * t)
    out = swing_kpis(p, dt_s)
    assert out["band_share_0p2_3hz_frac"] > 0.99
    assert out["band_share_frac"] > 0.99 and (out["share_low_hz"], out["share_high_hz"]) == (0.1, 20.0)


def test_a_slow_sine_is_outside_the_spec_band():
    dt_s = 0.025
    p = 10 + 2 * np.sin(2 * math.pi * 0.05 * _t(600, dt_s))
    assert swing_kpis(p, dt_s)["band_share_frac"] < 0.01
    assert swing_kpis(p, dt_s)["band_share_0p2_3hz_frac"] < 0.01


@pytest.mark.parametrize("band", [(0.1, 20.0), (0.2, 3.0), (5.0, 15.0)])
def test_white_noise_shares_by_band_width_over_nyquist(band):
    dt_s = 0.025
    p = 50 + np.random.default_rng(1).normal(0.0, 1.0, len(_t(1200, dt_s)))
    share, low, high = band_share(p, dt_s, band)
    assert share == pytest.approx((high - low) / (0.5 / dt_s), rel=0.05)


def test_parseval_total_swing_energy_is_the_variance():
    dt_s = 0.05
    t = _t(900, dt_s)
    p = 30 + 3 * np.sin(2 * math.pi * 0.7 * t) + np.random.default_rng(2).normal(0.0, 0.5, len(t))
    assert swing_energy_mw2(p, dt_s) == pytest.approx(np.var(p), rel=0.02)
    assert swing_energy_mw2(p, dt_s) == pytest.approx(3 ** 2 / 2 + 0.5 ** 2, rel=0.03)


def test_only_the_band_below_nyquist_counts_and_is_said():
    dt_s = 0.1  # Nyquist 5 Hz: of 0.1-20 Hz only 0.1-5 Hz is seen
    p = 10 + np.random.default_rng(3).normal(0.0, 1.0, len(_t(600, dt_s)))
    out = swing_kpis(p, dt_s)
    assert out["share_high_hz"] == 5.0
    assert out["band_share_frac"] == pytest.approx((5.0 - 0.1) / 5.0, rel=0.03)


def test_the_step_ramp_sees_what_the_one_second_ramp_averages():
    dt_s = 0.1
    p = np.where(np.arange(100) % 10 < 5, 10.0, 12.0)  # a 1 Hz square wave of 2 MW: flat over 1 s
    out = swing_kpis(p, dt_s)
    assert out["ramp_max_mw_s"] == pytest.approx(0.0)
    assert out["ramp_step_max_mw_s"] == pytest.approx(2.0 / dt_s)


def _kpis(p: np.ndarray, dt_s: float, spec: dict | None) -> dict:
    index = pd.date_range("2024-01-01", periods=len(p), freq=pd.Timedelta(seconds=dt_s), tz="UTC")
    params = {"swing": {"band_hz": (0.1, 2.0), **({"spec": spec} if spec is not None else {})}}
    return kpis.compute(pd.DataFrame({"site.p_mw": p}, index=index), dt_s, ROLES, params=params)


@pytest.mark.parametrize("spec, band_ok, ramp_ok", [
    ({"band_hz": [0.1, 5.0], "max_band_share_frac": 0.2, "max_ramp_mw_s": 10.0}, False, True),
    ({"band_hz": [1.0, 5.0], "max_band_share_frac": 0.2, "max_ramp_mw_s": 3.0}, True, False),
    ({"band_hz": [0.1, 5.0], "max_band_share_frac": None, "max_ramp_mw_s": 10.0}, None, True),
])
def test_the_spec_judges_each_column_and_sums_up(spec, band_ok, ramp_ok):
    """2 sin(2π·0.5 t): all its energy at 0.5 Hz, a largest 1 s change of 2·2·sin(π/2) = 4 MW."""
    dt_s = 0.1
    found = _kpis(10 + 2 * np.sin(2 * math.pi * 0.5 * _t(120, dt_s)), dt_s, spec)
    site = found["swing"]["site"]
    assert site["ramp_max_mw_s"] == pytest.approx(4.0, rel=1e-3)
    assert site.get("spec_band_ok") is band_ok and site["spec_ramp_ok"] is ramp_ok
    assert site["spec_band_share_frac"] == pytest.approx(1.0 if spec["band_hz"][0] < 0.5 else 0.0, abs=0.01)
    assert found["swing_spec"] == {"ok": bool(band_ok is not False and ramp_ok), "n_columns": 1,
                                   "n_columns_failing": int(band_ok is False or not ramp_ok),
                                   "failing": [] if band_ok is not False and ramp_ok else ["site"]}


def test_a_flat_record_has_no_share_and_passes_a_share_limit():
    """Round-off on a constant (a swing held flat by a smoothing knob) is no swing to share out."""
    dt_s = 0.1
    p = 300.0 + 1e-12 * np.random.default_rng(5).normal(size=600)
    found = _kpis(p, dt_s, {"band_hz": [0.1, 5.0], "max_band_share_frac": 0.2, "max_ramp_mw_s": None})
    site = found["swing"]["site"]
    assert site["band_share_frac"] is None and site["band_share_0p2_3hz_frac"] is None
    assert site["spec_band_ok"] is True and found["swing_spec"]["ok"] is True


def test_no_spec_no_verdicts():
    dt_s = 0.1
    found = _kpis(10 + np.sin(2 * math.pi * 0.5 * _t(60, dt_s)), dt_s, None)
    assert "swing_spec" not in found and not any(k.startswith("spec_") for k in found["swing"]["site"])
    unset = _kpis(10 + np.sin(2 * math.pi * 0.5 * _t(60, dt_s)), dt_s, {"band_hz": [0.1, 5.0],
                  "max_band_share_frac": None, "max_ramp_mw_s": None})  # the schema's default: no check
    assert "swing_spec" not in unset


SCENARIO = """
[scenario]
name = "swing_spec"
start = 2024-01-01T00:00:00Z
duration_s = 40
step_s = 0.1
tick_s = 0.1
engine = "direct"

[sims.facility]
adapter = "load"

[entities.site]
sim = "facility"
model = "FacilityLoad"
file = "p.csv"
time_column = "time"
interpolation = "linear"
"""


def _files(tmp_path, extra: str) -> str:
    t = _t(40, 0.1)
    stamps = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(t, unit="s")
    p = 10 + 2 * np.sin(2 * math.pi * 0.5 * t)
    pd.DataFrame({"time": stamps.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "p_mw": p}).to_csv(tmp_path / "p.csv", index=False)
    (tmp_path / "s.toml").write_text(SCENARIO + extra, encoding="utf-8")
    return tmp_path / "s.toml"


@pytest.mark.parametrize("spec, record, where, words", [
    ("{ band_hz = [0.1, 20.0], max_band_share_frac = 0.2 }", "", "kpis.swing.spec.band_hz = [0.1, 20.0]",
     ["above 5 Hz, the Nyquist frequency of this run's 0.1 s record step", "record at 0.025 s",
      "lower the band to [0.1, 5]"]),
    ("{ band_hz = [0.01, 2.0], max_band_share_frac = 0.2 }", "", "kpis.swing.spec.band_hz = [0.01, 2.0]",
     ["below 0.025 Hz, the spectral resolution", "raise low_hz to 0.025 or more"]),
    ("{ band_hz = [0.02, 2.0], max_band_share_frac = 0.2 }", "", "kpis.swing.spec.band_hz = [0.02, 2.0]",
     ["below 0.025 Hz", "raise low_hz to 0.025 or more, or run for 50 s or longer"]),
    ("{ band_hz = [0.0, 2.0], max_band_share_frac = 0.2 }", "", "kpis.swing.spec.band_hz = [0.0, 2.0]",
     ["below 0.025 Hz, the spectral resolution", "raise low_hz to 0.025"]),
    ("{ band_hz = [2.0, 0.1], max_band_share_frac = 0.2 }", "", "kpis.swing.spec.band_hz", ["low_hz < high_hz"]),
    ("{ band_hz = [0.1, 2.0] }", "", "kpis.swing.spec", ["sets no limit", "max_band_share_frac"]),
    ("{ max_band_share_frac = 0.2 }", "\n[record]\nstep_s = 1\n", "kpis.swing.spec",
     ["reads only records at <= 0.5 s", "every 1 s", "step_s"]),
    ("{ max_share = 0.2 }", "", "kpis.swing.spec.max_share",
     ["unknown key; allowed: band_hz, max_band_share_frac, max_ramp_mw_s"]),
    ("{ max_band_share_frac = 1.5 }", "", "kpis.swing.spec.max_band_share_frac", ["less than or equal to 1"]),
])
def test_a_spec_the_record_cannot_check_is_refused_naming_the_key_and_the_fix(tmp_path, spec, record, where, words):
    with pytest.raises(ScenarioError) as err:
        load_scenario(_files(tmp_path, f"\n[kpis.swing]\nspec = {spec}\n{record}"))
    text = str(err.value)
    assert where in text and all(w in text for w in words), text
    assert text.count("kpis.swing") == 1, text  # one clear message


def test_below_the_window_s_resolution_no_longer_run_helps(tmp_path):
    """The Welch window caps at 64 s, so 0.01 Hz is never resolved: the fix is the band, not the run."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(_files(tmp_path, "\n[kpis.swing]\nspec = { band_hz = [0.01, 2.0], max_band_share_frac = 0.2 }\n"))
    assert "raise low_hz to 0.025 or more" in str(err.value) and "run for" not in str(err.value)


def test_a_run_too_short_for_the_swing_kpi_cannot_check_a_spec(tmp_path):
    path = _files(tmp_path, "\n[kpis.swing]\nspec = { max_ramp_mw_s = 5.0 }\n")
    path.write_text(path.read_text().replace("duration_s = 40", "duration_s = 3"))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "kpis.swing.spec: the swing KPI needs at least 4 s of record and this run lasts 3 s" in str(err.value)


def test_a_ramp_only_spec_takes_any_band(tmp_path):
    scn = load_scenario(_files(tmp_path, "\n[kpis.swing]\nspec = { band_hz = [0.1, 20.0], max_ramp_mw_s = 5.0 }\n"))
    assert scn.kpis.swing.spec.max_ramp_mw_s == 5.0


def test_a_run_checks_the_spec_end_to_end(tmp_path):
    path = _files(tmp_path, "\n[kpis.swing]\nspec = { band_hz = [0.1, 5.0], max_band_share_frac = 0.2, "
                            "max_ramp_mw_s = 10.0 }\n")
    result = cosim.run(path, out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    site = result.kpis["swing"]["site"]
    assert site["spec_band_share_frac"] > 0.95 and site["spec_band_ok"] is False and site["spec_ramp_ok"] is True
    assert result.kpis["swing_spec"]["failing"] == ["site"] and result.kpis["swing_spec"]["ok"] is False
