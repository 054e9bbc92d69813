"""The unit-suffix rule."""

import pytest

from cosim.units import has_unit_suffix, unit_of


@pytest.mark.parametrize("name,unit", [
    ("p_mw", "mw"), ("q_mvar", "mvar"), ("e_mwh", "mwh"), ("vm_pu", "pu"), ("loading_pct", "pct"),
    ("t_supply_c", "c"), ("mdot_kg_s", "kg_s"), ("soc_frac", "frac"), ("ci_g_kwh", "g_kwh"),
    ("price_usd_mwh", "usd_mwh"), ("water_m3", "m3"), ("ghi_w_m2", "w_m2"), ("wind_m_s", "m_s"),
    ("n_jobs_running", ""), ("converged", ""), ("line_3_in_service", ""),
])
def test_known_units(name, unit):
    assert unit_of(name) == unit


@pytest.mark.parametrize("name", ["power", "p", "mw", "voltage", "temp", "_mw", "flow_kgs"])
def test_names_without_units_are_refused(name):
    assert not has_unit_suffix(name)
