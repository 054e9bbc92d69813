"""The swing KPI's band as a scenario parameter (``[kpis.swing] band_hz``, cosim/kpis/swing.py).

A power series 10 + 2 sin(2π·0.5 t) + 1 sin(2π·3 t) MW: a sinusoid of amplitude A has an rms of
A/√2, all of it at its frequency (Parseval), so the default 0.1-2 Hz band holds the 0.5 Hz part
(1.414 MW) and a 2.5-4 Hz band the 3 Hz part (0.707 MW).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import cosim
from cosim import kpis
from cosim.errors import ScenarioError
from cosim.roles import RunRoles
from cosim.scenario import load_scenario

DT_S = 0.1
ROLES = RunRoles({"site": "load"})
SCENARIO = """
[scenario]
name = "swing_band"
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


def _p(n: int = 400) -> np.ndarray:
    t = np.arange(n) * DT_S
    return 10 + 2 * np.sin(2 * math.pi * 0.5 * t) + 1 * np.sin(2 * math.pi * 3 * t)


def _swing(params=None) -> dict:
    index = pd.date_range("2024-01-01", periods=400, freq=pd.Timedelta(seconds=DT_S), tz="UTC")
    ts = pd.DataFrame({"site.p_mw": _p()}, index=index)
    return kpis.compute(ts, DT_S, ROLES, params=params)["swing"]["site"]


def test_the_band_picks_which_swing_counts():
    default = _swing()
    assert (default["band_low_hz"], default["band_high_hz"]) == (0.1, 2.0)
    assert default["band_rms_mw"] == pytest.approx(2 / math.sqrt(2), rel=0.02) and default["band_peak_hz"] == pytest.approx(0.5)
    high = _swing({"swing": {"band_hz": (2.5, 4.0)}})
    assert (high["band_low_hz"], high["band_high_hz"]) == (2.5, 4.0)
    assert high["band_rms_mw"] == pytest.approx(1 / math.sqrt(2), rel=0.02) and high["band_peak_hz"] == pytest.approx(3.0)
    wide = _swing({"swing": {"band_hz": (0.1, 4.0)}})
    assert wide["band_rms_mw"] == pytest.approx(math.sqrt(2 + 0.5), rel=0.02)  # both parts: rms add in squares
    assert {k: v for k, v in high.items() if not k.startswith("band")} == \
        {k: v for k, v in default.items() if not k.startswith("band")}  # the other KPIs do not depend on it


def _files(tmp_path, extra: str = "") -> str:
    t = np.arange(400) * DT_S
    stamps = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(t, unit="s")
    pd.DataFrame({"time": stamps.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "p_mw": _p()}).to_csv(tmp_path / "p.csv", index=False)
    (tmp_path / "s.toml").write_text(SCENARIO + extra, encoding="utf-8")
    return tmp_path / "s.toml"


def test_a_run_takes_the_band_from_the_scenario_and_keeps_it_in_its_metadata(tmp_path):
    path = _files(tmp_path, "\n[kpis.swing]\nband_hz = [2.5, 4.0]\n")
    (tmp_path / "plain").mkdir()
    assert load_scenario(_files(tmp_path / "plain")).kpis.swing.band_hz == (0.1, 2.0)  # the default without the table
    result = cosim.run(path, out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    assert result.kpis["swing"]["site"]["band_peak_hz"] == pytest.approx(3.0)
    assert result.kpis["swing"]["site"]["band_rms_mw"] == pytest.approx(1 / math.sqrt(2), rel=0.02)
    assert json.loads((result.run_dir / "metadata.json").read_text())["kpi_params"]["swing"] == {
        "band_hz": [2.5, 4.0], "spec": {"band_hz": [0.1, 20.0], "max_band_share_frac": None, "max_ramp_mw_s": None}}


@pytest.mark.parametrize("table, where, words", [
    ("[kpis.swing]\nband_hz = [2.0, 0.1]\n", "kpis.swing.band_hz", "low_hz < high_hz"),
    ("[kpis.swing]\nband = [0.1, 2.0]\n", "kpis.swing.band", "unknown key; allowed: band_hz"),
    ("[kpis.swig]\nband_hz = [0.1, 2.0]\n", "kpis.swig", "unknown key"),
])
def test_a_bad_band_is_refused_naming_the_key(tmp_path, table, where, words):
    with pytest.raises(ScenarioError) as err:
        load_scenario(_files(tmp_path, "\n" + table))
    assert where in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("table, record, said", [
    ("band_hz = [6.0, 9.0]", "", "above 5 Hz, the highest frequency a 0.1 s record shows"),
    ("band_hz = [0.1, 2.0]", "\n[record]\nstep_s = 1\n", "no effect, the swing KPI needs a record step <= 0.5 s"),
    ("band_hz = [0.1, 2.0]", "", None),
])
def test_a_band_the_recording_cannot_show_is_said(tmp_path, table, record, said):
    """Accepted but without effect would be a silent "ok": a band past the record's Nyquist frequency, or any
    band when the record step is too long for the swing KPI, is a validation warning naming the key."""
    scn = load_scenario(_files(tmp_path, f"\n[kpis.swing]\n{table}\n{record}"))
    found = [w for w in scn.warnings if "kpis.swing.band_hz" in w]
    assert (found == []) if said is None else any(said in w for w in found), scn.warnings
