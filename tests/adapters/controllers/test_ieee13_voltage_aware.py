"""``scenarios/ieee13_voltage_aware.toml``: an LLM-inference campus at bus 671 of the IEEE
13-node feeder (OpenDSS, 1 s steps), with and without the voltage-aware controller
(issue #8 item 5; the OpenG2G setting, arXiv:2605.05519).

The band is [0.95, 1.05] pu (ANSI C84.1 range A), judged at the point of connection: the
lowest and highest of bus 671's three phase voltages each second. The whole feeder is out
of band in both runs for reasons no load at 671 can fix (the IEEE 13 base case's regulator
output above 1.05 pu, and phase c of 611/675/684 below 671c); the test checks that too, so
the header's reason for judging at the PCC stays true.

Cut to the first 30 minutes with an override. Checked: the baseline is under-voltage at 671
for at least half of it; the controller removes at least 90 % of those seconds and of the
pu·s integral, creates no over-voltage at 671, and holds 671 in band once it has acted (after
10 s); the cost is reported (cosim.kpis.grid.versus_baseline) and bounded: under 10 % of the
tokens.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cosim.kpis import grid as kpis_grid
from cosim.run import run

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "ieee13_voltage_aware.toml"
DURATION_S = 1_800
DT_S = 1.0
PHASES = [f"feeder.bus_671_{p}_vm_pu" for p in "abc"]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("ieee13_voltage_aware")
    found = {}
    for name, overrides in {"controlled": {}, "baseline": {"entities.vctl.enabled": False}}.items():
        result = run(SCENARIO, out_dir=out, overrides={"scenario.duration_s": DURATION_S, **overrides})
        assert result.ok, (name, result.reason)
        found[name] = result
    return found


@pytest.fixture(scope="module")
def runs(results) -> dict[str, pd.DataFrame]:
    return {name: result.timeseries() for name, result in results.items()}


def _pcc(ts: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    phases = ts[PHASES]
    return phases.min(axis=1), phases.max(axis=1)


def test_controller_removes_most_undervoltage_at_the_pcc(runs):
    ctl, base = runs["controlled"], runs["baseline"]
    assert len(ctl) == len(base) == DURATION_S
    low, high = _pcc(ctl)
    low0, high0 = _pcc(base)
    under, under0 = kpis_grid.voltage_kpis(low, low, DT_S), kpis_grid.voltage_kpis(low0, low0, DT_S)
    band, band0 = kpis_grid.voltage_kpis(low, high, DT_S), kpis_grid.voltage_kpis(low0, high0, DT_S)
    cost = kpis_grid.versus_baseline(ctl, base)["campus"]
    print(f"\nrun         under<0.95 s  pu*s    671 min  671 max  band s  campus MW  tokens/s  SLO\n"
          f"baseline    {under0['violation_s']:.0f}          {under0['violation_pu_s']:.3f}   "
          f"{band0['vm_min_pu']:.4f}   {band0['vm_max_pu']:.4f}   {band0['violation_s']:.0f}    "
          f"{base['campus.p_mw'].mean():.3f}      {base['campus.tokens_per_s'].mean() / 1e3:.0f}k     "
          f"{base['campus.slo_attainment_frac'].mean():.3f}\n"
          f"controlled  {under['violation_s']:.0f}             {under['violation_pu_s']:.3f}   "
          f"{band['vm_min_pu']:.4f}   {band['vm_max_pu']:.4f}   {band['violation_s']:.0f}       "
          f"{ctl['campus.p_mw'].mean():.3f}      {ctl['campus.tokens_per_s'].mean() / 1e3:.0f}k     "
          f"{ctl['campus.slo_attainment_frac'].mean():.3f}\n{cost}")
    assert under0["violation_s"] >= 0.5 * DURATION_S  # the baseline sags out of band most of the time
    assert under["violation_s"] <= 0.1 * under0["violation_s"]  # the controller removes most of it
    assert under["violation_pu_s"] <= 0.1 * under0["violation_pu_s"]
    assert band["violation_s"] <= 0.1 * band0["violation_s"]  # and creates no over-voltage instead
    assert band["vm_max_pu"] <= kpis_grid.V_HIGH_PU
    assert (low.iloc[10:] >= kpis_grid.V_LOW_PU).all()  # in band once its setpoints act
    assert band["vm_min_pu"] > band0["vm_min_pu"]
    assert ctl["campus.p_mw"].mean() < base["campus.p_mw"].mean()
    assert 0.0 <= cost["throughput_loss_frac"] < 0.10


def test_the_pcc_reading_is_the_lowest_phase_and_the_feeder_is_out_of_band_anyway(runs):
    for ts in runs.values():
        low, _ = _pcc(ts)
        assert (ts["feeder.bus_671_c_vm_pu"] == low).all()  # the controller reads the lowest phase
        # downstream phase-c buses stay below 0.95 and the regulator output above 1.05 in both runs
        assert (ts["feeder.vm_min_pu"] < kpis_grid.V_LOW_PU).mean() > 0.9
        assert (ts["feeder.vm_max_pu"] > kpis_grid.V_HIGH_PU).all()


def test_kpis_json_reports_the_pcc_and_the_all_bus_figures(results, runs):
    """The header's figures come from kpis.json: the PCC block equals the under-voltage computed
    here from 671's three phases, and the all-bus figures (every bus-phase but 650 and rg60,
    OpenG2G's metric) stay out of band in both runs: phase c of 611/675/684 sits below 671c."""
    for name, result in results.items():
        low, high = _pcc(runs[name])
        pcc = result.kpis["points_of_connection"]["pcc"]
        by_hand = kpis_grid.voltage_kpis(low, high, DT_S)
        assert pcc["violation_s"] == by_hand["violation_s"]
        assert pcc["vm_min_pu"] == pytest.approx(by_hand["vm_min_pu"])
        feeder = result.kpis["feeder"]
        assert feeder["allbus_vm_min_pu"] < pcc["vm_min_pu"]
        assert feeder["allbus_violation_pu_s"] > pcc["violation_pu_s"]
        assert feeder["allbus_undervoltage_s"] > 0.9 * DURATION_S
        assert feeder["import_mwh"] > 0
    base, ctl = (results[n].kpis["feeder"]["allbus_violation_pu_s"] for n in ("baseline", "controlled"))
    assert ctl < 0.2 * base  # the integral falls though the seconds do not
