"""ASHRAE Guideline 14 calibration indices (cosim/kpis/calibration.py) against hand-computed series,
and the reference chiller series of the Guideline 14 case (scenarios/data/cooling/).

Indices: ASHRAE Guideline 14-2014 §5.2.11.3, NMBE = Σ(y − ŷ)/((n − p)·ȳ),
CV(RMSE) = sqrt(Σ(y − ŷ)²/(n − p))/ȳ, y the reference, p = 1. Chiller: EnergyPlus
datasets/Chillers.idf, "ElectricEIRChiller Trane CVHE 1372kW/7.49COP/Vanes": its curves are
near 1 at the reference point (5.56 °C leaving chilled water, 23.89 °C entering condenser
water; EnergyPlus warns beyond ±10 %): by hand CAPFT = 0.9595, EIRFT = 1.0232, EIRFPLR(1) =
0.9962 (a mis-copied coefficient moves one of them).
"""

from __future__ import annotations

import gzip
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import calibration
from cosim.kpis._block import KpiInput
from cosim.roles import RunRoles

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("make_g14", ROOT / "scenarios" / "published" / "make_ashrae_g14_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_indices_equal_the_hand_computed_values():
    """y = 1, 2, 3, 4 (ȳ = 2.5), ŷ = y - (0.5, -0.5, 0.5, 0.5): Σe = 1, Σe² = 1, n - p = 3:
    NMBE = 1 / (3 · 2.5) = 0.13333, CV(RMSE) = sqrt(1/3) / 2.5 = 0.23094."""
    cv, nmbe = calibration.g14_indices(np.array([1.0, 2, 3, 4]), np.array([0.5, 2.5, 2.5, 3.5]))
    assert nmbe == pytest.approx(1 / 7.5)
    assert cv == pytest.approx(math.sqrt(1 / 3) / 2.5)
    cv, nmbe = calibration.g14_indices(np.array([1.0, 2, 3, 4]), np.array([1.5, 1.5, 3.5, 4.5]))
    assert nmbe == pytest.approx(-1 / 7.5)                              # the model reads high: negative
    assert calibration.g14_indices(np.ones(5), np.ones(5)) == (0.0, 0.0)
    with pytest.raises(ValueError, match="more than 1 points"):
        calibration.g14_indices(np.array([1.0]), np.array([1.0]))


def _run(step_s: int, hours: int, ref, model) -> KpiInput:
    index = pd.date_range("2023-01-01", periods=hours * 3600 // step_s, freq=f"{step_s}s", tz="UTC")
    ts = pd.DataFrame({"src.ref_p_chillers_mw": ref(index), "plant.p_chillers_mw": model(index),
                       "other.p_chillers_mw": 0.0 * np.ones(len(index))}, index=index)
    return KpiInput(ts, step_s / 3600, step_s, RunRoles({}), links={"src": {"plant"}})


def test_block_pairs_a_reference_with_the_entities_it_feeds_on_hourly_means():
    """Within each hour the model swings +-0.1 around the reference (5-min steps): the hourly
    means agree, so both indices are 0 (a 5-min comparison would not be). 'other' records the
    attribute but is not fed by 'src': not compared."""
    def ref(index):
        return 1.0 + 0.5 * (index.hour % 2)

    def model(index):
        return ref(index) + np.where(index.minute < 30, 0.1, -0.1)

    inp = _run(300, 24 * 3, ref, model)
    assert calibration._columns(list(inp.ts.columns), inp.roles) == list(inp.ts.columns)
    out = calibration._compute(inp)["calibration"]
    assert set(out) == {"plant"}
    entry = out["plant"]["p_chillers_mw"]
    assert entry["n_hours"] == 72 and entry["reference"] == "src.ref_p_chillers_mw"
    assert entry["cv_rmse_frac"] == pytest.approx(0.0, abs=1e-12)
    assert entry["nmbe_frac"] == pytest.approx(0.0, abs=1e-12)
    assert entry["within_hourly_bounds"] is True
    assert entry["n_months"] == 0 and entry["within_monthly_bounds"] is None    # no whole month


def test_block_reads_a_biased_model_and_whole_months_only():
    """Jan + Feb + 3 days of March 2023, hourly; the model reads 12 % low: hourly NMBE =
    0.12 · n/(n − 1), outside the 10 % bound; CV(RMSE) the same; two whole months (March is
    partial): monthly NMBE = 0.12 · 2/(2 − 1) = 0.24."""
    hours = (31 + 28 + 3) * 24
    inp = _run(3600, hours, lambda i: np.full(len(i), 2.0), lambda i: np.full(len(i), 1.76))
    entry = calibration._compute(inp)["calibration"]["plant"]["p_chillers_mw"]
    assert entry["nmbe_frac"] == pytest.approx(0.12 * hours / (hours - 1))
    assert entry["cv_rmse_frac"] == pytest.approx(0.12 * math.sqrt(hours / (hours - 1)))
    assert entry["within_hourly_bounds"] is False
    assert entry["n_months"] == 2
    assert entry["monthly_nmbe_frac"] == pytest.approx(0.24)
    assert entry["within_monthly_bounds"] is False


def test_an_hour_with_a_missing_sample_is_left_out():
    def ref(index):
        return np.ones(len(index))

    inp = _run(900, 4, ref, ref)
    inp.ts.iloc[5, 1] = np.nan                                     # hour 1 of the model loses a sample
    entry = calibration._compute(inp)["calibration"]["plant"]["p_chillers_mw"]
    assert entry["n_hours"] == 3


def test_reference_chiller_curves_are_one_at_their_reference_point():
    g14 = _script()
    assert g14.biquadratic(g14.CAPFT, 5.56, 23.89) == pytest.approx(0.9595, abs=1e-4)
    assert g14.biquadratic(g14.EIRFT, 5.56, 23.89) == pytest.approx(1.0232, abs=1e-4)
    assert sum(g14.EIRFPLR) == pytest.approx(0.9962, abs=1e-4)
    # the plant at its own 6.67 C setpoint and a 23.89 C condenser: one chiller, PLR = Q / Q_avail
    plant = g14.chiller_plant_w(np.array([1.0e6]), np.array([23.89 - g14.APPROACH_K]))
    q_avail = g14.Q_REF_W * g14.biquadratic(g14.CAPFT, g14.T_CHW_C, 23.89)
    assert plant["n_on"][0] == 1 and plant["plr"][0] == pytest.approx(1.0e6 / q_avail)


def test_shipped_reference_series_is_what_the_script_writes():
    shipped = ROOT / "scenarios" / "data" / "cooling" / "ashrae_g14_chiller_reference.csv.gz"
    text = gzip.decompress(shipped.read_bytes()).decode()
    assert text == _script().build().to_csv(index=False, lineterminator="\n")


@pytest.mark.parametrize("step_s", [420, 900, 2400, 3600])
def test_every_complete_hour_counts_whatever_the_step(step_s):
    """A step that does not divide the hour (420 s: 8 or 9 samples an hour) or spans more of it
    (2400 s) keeps every hour the run covers whole; a missing sample still drops its hour; the
    run's last, partly covered hour is left out."""
    index = pd.date_range("2023-01-01", "2023-01-03 23:59:59", freq=f"{step_s}s", tz="UTC")
    ref = pd.Series(1.0 + np.arange(len(index)) % 5, index=index)
    entry = calibration.pair_kpis(ref, ref * 1.1, "p_chillers_mw")
    covered = sum(1 for h in pd.date_range("2023-01-01", periods=72, freq="1h", tz="UTC")
                  if ((index >= h) & (index < h + pd.Timedelta(hours=1))).any()
                  and h + pd.Timedelta(hours=1) <= index[-1] + pd.Timedelta(seconds=step_s))
    assert entry["n_hours"] == covered >= 48
    model = ref * 1.1
    model.iloc[len(index) // 2] = np.nan
    assert calibration.pair_kpis(ref, model, "p_chillers_mw")["n_hours"] == covered - 1


def test_whole_months_with_an_idle_reference_give_no_monthly_indices():
    """A reference idle over the whole months (a winter chiller) and loaded only in a partial
    month: hourly indices from the loaded hours, monthly ones None (not an error that would
    take every KPI of the run with it)."""
    index = pd.date_range("2023-01-01", "2023-03-15 23:00", freq="1h", tz="UTC")
    ref = pd.Series(np.where(index >= pd.Timestamp("2023-03-01", tz="UTC"), 2.0, 0.0), index=index)
    entry = calibration.pair_kpis(ref, ref * 0.95, "p_chillers_mw")
    assert entry["n_months"] == 2
    assert entry["monthly_cv_rmse_frac"] is None and entry["within_monthly_bounds"] is None
    assert entry["nmbe_frac"] == pytest.approx(0.05 * len(index) / (len(index) - 1))
