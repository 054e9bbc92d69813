"""``scenarios/thermal_capping.toml`` end to end: thermal-aware GPU capping keeps the rack
inlet at or below 27 °C (ASHRAE TC 9.9 recommended envelope, class A1, *Thermal Guidelines
for Data Processing Environments*, 5th ed., 2021) in a warm-water hall left with one 0.5 MW
chiller, where the uncapped baseline (``--set entities.coord.thermal_capping=false``)
passes it.

Cut to 10:00-18:00 UTC with an override (the baseline first passes 27 °C after 14:00).
Checked: the baseline is above the limit for at least an hour; the capped run never is;
the capping is what did it (the allowance fell, the campus drew less, the plant left less
heat unmet) and it is paid in compute (training GPU-hours delayed).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cosim.kpis import grid as kpis_grid
from cosim.run import run

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "thermal_capping.toml"
CUT = {"scenario.duration_s": 28_800}  # 10:00-18:00 UTC
T_INLET_LIMIT_C = 27.0
DT_S = 60.0


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("thermal_capping")
    series = {}
    for name, overrides in {"capped": {}, "baseline": {"entities.coord.thermal_capping": False}}.items():
        result = run(SCENARIO, out_dir=out, overrides={**CUT, **overrides})
        assert result.ok, (name, result.reason)
        series[name] = result.timeseries()
    return series


def test_capping_keeps_the_rack_inlet_under_27_c_where_the_baseline_passes_it(runs):
    cap, base = runs["capped"], runs["baseline"]
    t_cap, t_base = cap["hall.t_rack_inlet_c"], base["hall.t_rack_inlet_c"]
    over_base_s = float((t_base > T_INLET_LIMIT_C).sum() * DT_S)
    over_cap_s = float((t_cap > T_INLET_LIMIT_C).sum() * DT_S)
    excursion_base_kh = float(base["hall.dt_inlet_excursion_k"].sum() * DT_S / 3600)
    excursion_cap_kh = float(cap["hall.dt_inlet_excursion_k"].sum() * DT_S / 3600)
    cost = kpis_grid.versus_baseline(cap, base)["campus"]
    print(f"\nrun       inlet max  min > 27 C  excursion K*h  mean MW  unmet MW  GPU-h delayed\n"
          f"baseline  {t_base.max():.2f}      {over_base_s / 60:.0f}         {excursion_base_kh:.3f}          "
          f"{base['campus.p_mw'].mean():.3f}    {base['plant.q_unmet_mw'].mean():.3f}     "
          f"{base['campus.delay_gpu_h'].iloc[-1]:.0f}\n"
          f"capped    {t_cap.max():.2f}      {over_cap_s / 60:.0f}           {excursion_cap_kh:.3f}          "
          f"{cap['campus.p_mw'].mean():.3f}    {cap['plant.q_unmet_mw'].mean():.3f}     "
          f"{cap['campus.delay_gpu_h'].iloc[-1]:.0f}\n{cost}")
    assert over_base_s >= 3600  # the baseline breaks the limit for at least an hour ...
    assert excursion_base_kh > 0
    assert t_cap.max() <= T_INLET_LIMIT_C  # ... the capped run never does
    assert over_cap_s == 0 and excursion_cap_kh == 0
    # it is the capping that holds it: the allowance fell and the campus drew less
    assert cap["coord.allowance_frac"].min() < 0.5
    assert (base["coord.allowance_frac"] == 1.0).all()
    assert cap["campus.p_mw"].mean() < base["campus.p_mw"].mean() - 0.1
    assert cap["plant.q_unmet_mw"].mean() < base["plant.q_unmet_mw"].mean()
    assert cost["delay_added_gpu_h"] > 0  # and compute pays for it
