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


def _unit_by_scan(name):
    """The rule as stated: the longest listed suffix ``name`` ends with after ``_`` and a character."""
    from cosim.units import DIMENSIONLESS, UNIT_SUFFIXES, _derived_unit

    if name.startswith("n_") or any(name == d or name.endswith("_" + d) for d in DIMENSIONLESS):
        return ""
    for suffix in sorted(UNIT_SUFFIXES, key=len, reverse=True):
        if name.endswith("_" + suffix) and len(name) > len(suffix) + 1:
            return suffix
    return _derived_unit(name)


def test_unit_of_is_the_longest_listed_suffix():
    """Every listed suffix, alone and after another, behind short and odd stems (empty, ``_``, a
    suffix itself), gets the unit a scan of the list longest-first gives."""
    from cosim.units import UNIT_SUFFIXES

    stems = ["", "_", "x", "x_", "p", "a_b", "n", "in", "s_", "__"]
    tails = list(UNIT_SUFFIXES) + [f"{a}_{b}" for a in UNIT_SUFFIXES for b in ("s", "k", "h", "m", "m2", "per_s")]
    names = [f"{stem}_{tail}" for stem in stems for tail in tails] + [*tails, "m_s2", "x_m_s2", "q_mol_s"]
    assert len(names) > 1000
    for name in names:
        assert unit_of(name) == _unit_by_scan(name), name
