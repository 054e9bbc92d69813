"""Wind farm: power curves as published, hub-height profiles, farm scaling, curtailment."""

from __future__ import annotations

import math

import pytest

from cosim.adapters.wind import (TURBINES, WindFarm, WindFarmParams, WindSim, hub_speed_log_m_s, hub_speed_power_m_s,
                           turbine_power_mw)


@pytest.mark.parametrize("turbine, v, kw", [
    # NREL/turbine-models Offshore/NREL_5MW_126_RWT.csv (Jonkman et al. 2009 reference turbine)
    ("nrel_5mw", 3.0, 40.5), ("nrel_5mw", 8.0, 1771.1), ("nrel_5mw", 10.5, 3984.49), ("nrel_5mw", 13.0, 5000.0),
    # NREL/turbine-models Onshore/BAR_BAU-LBNL-IEA_3.3MW_156.csv
    ("iea_3p3mw", 3.5, 0.0), ("iea_3p3mw", 6.0, 1013.13516), ("iea_3p3mw", 8.75, 3142.228733), ("iea_3p3mw", 20.0, 3300.0),
])
def test_power_curves_reproduce_the_published_tables(turbine, v, kw):
    assert turbine_power_mw(TURBINES[turbine], v) * 1000 == pytest.approx(kw, rel=1e-6)


def test_below_cut_in_and_above_cut_out_is_zero():
    assert turbine_power_mw(TURBINES["nrel_5mw"], 2.9) == 0.0
    assert turbine_power_mw(TURBINES["nrel_5mw"], 25.1) == 0.0
    curve = TURBINES["iea_3p3mw"]
    powers = [turbine_power_mw(curve, v / 10) for v in range(0, 250)]
    assert all(b >= a for a, b in zip(powers, powers[1:]))  # monotone up to cut-out


def test_hub_height_profiles_by_hand():
    """Log law: 5 m/s at 10 m, z0 = 0.03 m, to 110 m: 5·ln(110/0.03)/ln(10/0.03) = 7.063 m/s.
    Power law (alpha 1/7): 5·11^(1/7) = 7.043 m/s."""
    assert hub_speed_log_m_s(5.0, 10, 110, 0.03) == pytest.approx(5 * math.log(110 / 0.03) / math.log(10 / 0.03))
    assert hub_speed_log_m_s(5.0, 10, 110, 0.03) == pytest.approx(7.063, abs=1e-3)
    assert hub_speed_power_m_s(5.0, 10, 110, 1 / 7) == pytest.approx(7.043, abs=1e-3)
    with pytest.raises(ValueError, match="roughness"):
        hub_speed_log_m_s(5.0, 0.01, 110, 0.03)


def test_farm_scales_with_count_availability_and_losses():
    farm = WindFarm(WindFarmParams(turbine="iea_3p3mw", n_turbines=4, availability_frac=0.95, loss_frac=0.1,
                                   measurement_height_m=110.0))
    assert farm.power_mw(12.0) == pytest.approx(4 * 3.3 * 0.95 * 0.9)
    assert farm.rated_mw == pytest.approx(13.2)


def test_adapter_curtails_on_request():
    sim = WindSim()
    sim.init("w", time_resolution=1.0, start_utc="2024-07-15T00:00:00Z", step_s=60, duration_s=120, seed=0)
    sim.create(1, "WindFarm", eid="wf", turbine="iea_3p3mw", n_turbines=2, loss_frac=0.0, availability_frac=1.0)
    sim.step(0, {"wf": {"wind_m_s": {"w": 10.0}, "p_limit_mw": {"c": 4.0}}}, 120)
    out = sim.get_data({"wf": ["p_mw", "p_avail_mw", "p_curtailed_mw"]})["wf"]
    assert out == {"p_mw": 4.0, "p_avail_mw": pytest.approx(6.6), "p_curtailed_mw": pytest.approx(2.6)}
