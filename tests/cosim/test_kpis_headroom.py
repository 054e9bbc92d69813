"""Headroom for flexible load (cosim/kpis/headroom.py) against a hand-computed year.

Method: Norris et al., "Rethinking Load Growth", Nicholas Institute, Duke University,
NI R 25-01 (2025), Appendix C as stated in its text (seasonal peak thresholds, constant new load,
mean annual curtailment rate equal to the limit).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import headroom


def flat_year() -> pd.Series:
    """2023 (8,760 h) at 100 MW, with 10 h at 110 MW on 15 July and 5 h at 105 MW on 16 January."""
    index = pd.date_range("2023-01-01", periods=8760, freq="h", tz="UTC")
    load = pd.Series(100.0, index=index)
    load[(index >= "2023-07-15 10:00") & (index < "2023-07-15 20:00")] = 110.0
    load[(index >= "2023-01-16 17:00") & (index < "2023-01-16 22:00")] = 105.0
    return load


def test_thresholds_follow_the_seasons_and_shoulder_months():
    threshold, summer, winter = headroom.thresholds(flat_year())
    assert (summer, winter) == (110.0, 105.0)
    months = flat_year().index.month
    assert set(threshold[np.isin(months, (4, 5, 6, 7, 8, 9, 10))]) == {110.0}
    assert set(threshold[np.isin(months, (11, 12, 1, 2, 3))]) == {105.0}


def test_headroom_equals_the_hand_computed_root():
    """Below 5 MW only the 15 peak hours curtail, at L each: rate 15/8760 = 0.171 %, under the
    0.25 % limit whatever L. Above 5 MW the 3,619 other hours of Nov-Mar (151 days = 3,624 h less
    the 5 peak hours) curtail L - 5 each: (15 L + 3619 (L - 5)) / (8760 L) = 0.0025 gives
    L = 18095 / 3612.1 = 5.00955 MW."""
    entry = headroom.system_headroom(flat_year(), 1.0)
    at = entry["at_0_25_pct"]
    assert at["headroom_mw"] == pytest.approx(18095 / 3612.1, rel=1e-7)
    assert at["curtailed_h"] == 15 + 3619
    # runs: 1 Jan-31 Mar (2,160 h), the 10 July hours, 1 Nov-31 Dec (1,464 h)
    assert at["event_mean_h"] == pytest.approx((2160 + 10 + 1464) / 3)
    # the 15 peak hours lose all of L; the others keep 1 - 0.00955/5.00955 = 99.8 % of it
    assert at["retained_90_frac"] == pytest.approx(3619 / 3634)
    assert at["curtailed_mwh"] == pytest.approx(0.0025 * at["headroom_mw"] * 8760, rel=1e-6)
    assert entry["peak_mw"] == 110.0 and entry["n_years"] == 1
    assert entry["load_factor_frac"] == pytest.approx(flat_year().mean() / 110.0)
    # a looser limit never gives less headroom
    sizes = [entry[k]["headroom_mw"] for k in headroom.LIMITS]
    assert sizes == sorted(sizes)


def test_the_rate_is_the_mean_of_the_annual_rates_not_a_pooled_ratio():
    """2023 as above, then the first half of 2024 flat at 100 MW: at L = 3 MW, 2023 curtails its 15
    peak hours (rate 15/8760) and 2024 nothing, so the mean rate is 15/8760/2; pooling the energy
    over both (15 / (8760 + 4368)) would give another number."""
    second = pd.Series(100.0, index=pd.date_range("2024-01-01", periods=4368, freq="h", tz="UTC"))
    load = pd.concat([flat_year(), second])
    threshold, _, _ = headroom.thresholds(load)
    rate = headroom.mean_annual_rate(load.to_numpy(), threshold, load.index.year.to_numpy(), 3.0)
    assert rate == pytest.approx(15 / 8760 / 2)
    assert rate != pytest.approx(15 / (8760 + 4368))


def test_the_block_reads_every_system_load_column():
    ts = pd.DataFrame({"pjm.p_system_load_mw": flat_year(), "pjm.ci_g_kwh": 400.0})
    assert headroom._columns(list(ts.columns), None) == ["pjm.p_system_load_mw"]
