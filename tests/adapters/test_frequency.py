"""The balancing-area frequency model against the analytic step response of the linear model.

Closed form of a load step ΔP (pu) with one lumped lag, ``Δf(s) = −(ΔP/s) (1 + sT) /
(2HT s² + (2H + DT) s + (D + 1/R))`` (Kundur 1994 ch. 11; Anderson & Mirheydar, IEEE Trans.
PWRS 5(3):720-729, 1990 for the reheat form): settling ``Δf_ss = −ΔP/(D + 1/R)``, and with
``σ = ζωn``, ``ωd = ωn sqrt(1 − ζ²)``::

    Δf(t) = Δf_ss [1 − e^(−σt) (cos ωd t + ((σ − ωn² T)/ωd) sin ωd t)]
    t_nadir = atan2(T ωd, σT − 1) / ωd

Published check numbers (derived and checked with scipy.signal.step in
/work/notes/frequency.md §1.5): H = 5 s, D = 1, R = 0.05, T = 0.5 s, ΔP = 0.1 pu →
t_nadir = 1.174 s, Δf_nadir = −0.006150 pu, Δf_ss = −0.004762 pu.
"""

from __future__ import annotations

import math

import pytest

from cosim.adapters.frequency import PRESETS, Area, AreaParams, FrequencySim

F0 = 60.0
BASE = 1000.0


def _area(**kw) -> Area:
    """An area on the test base; the linear model (no deadband) unless ``deadband_hz`` is given."""
    return Area(AreaParams.model_validate({"f_nominal_hz": F0, "s_base_mw": BASE, "deadband_hz": 0.0, **kw}))


def _lumped(h, d, r, t):
    """(Δf(t) per unit step, t_nadir) of the lumped model. [pu/pu, s]"""
    wn = math.sqrt((d + 1 / r) / (2 * h * t))
    zeta = (2 * h + d * t) / (2 * math.sqrt(2 * h * t * (d + 1 / r)))
    return _second_order(wn, zeta, t, -1.0 / (d + 1 / r))


def _reheat(h, d, r, f_hp, t_rh):
    """Anderson & Mirheydar's reduced-order model with Km = 1 (no governor lag)."""
    wn = math.sqrt((d * r + 1) / (2 * h * r * t_rh))
    zeta = wn * (2 * h * r + (d * r + f_hp) * t_rh) / (2 * (d * r + 1))
    return _second_order(wn, zeta, t_rh, -r / (d * r + 1))


def _second_order(wn, zeta, t, ss):
    sigma, wd = zeta * wn, wn * math.sqrt(1 - zeta**2)

    def response(time_s):
        return ss * (1 - math.exp(-sigma * time_s) * (math.cos(wd * time_s)
                                                      + (sigma - wn**2 * t) / wd * math.sin(wd * time_s)))
    return response, math.atan2(t * wd, sigma * t - 1) / wd


def _run(area: Area, p_step_mw: float, duration_s: float, step_s: float) -> list[dict]:
    rows, n = [], round(duration_s / step_s)
    for k in range(n):
        rows.append(area.step(k * step_s, step_s, 0.0 if k == 0 else p_step_mw, 0.0))
    return rows


def test_published_numbers_of_the_lumped_model():
    response, t_nadir = _lumped(5.0, 1.0, 0.05, 0.5)
    assert t_nadir == pytest.approx(1.174, abs=1e-3)
    assert 0.1 * response(t_nadir) == pytest.approx(-0.006150, abs=1e-6)
    assert 0.1 * response(1e4) == pytest.approx(-0.004762, abs=1e-6)


def test_lumped_step_response_matches_the_closed_form():
    """A 0.1 pu load step at t = 0 (operating point 0 MW, 100 MW from the first step on)."""
    area = _area(h_s=5.0, d_pu=1.0, r_pu=0.05, t_gov_s=0.5, t_ch_s=0.0, t_reheat_s=0.0)
    area.p_ref_mw = 0.0
    dt = 0.01
    rows = [area.step(k * dt, dt, 100.0, 0.0) for k in range(3000)]
    response, t_nadir = _lumped(5.0, 1.0, 0.05, 0.5)
    for k in (10, 50, 117, 300, 1000, 2999):
        assert rows[k]["f_dev_hz"] == pytest.approx(0.1 * response(k * dt) * F0, abs=1e-7), k
    nadir_hz = F0 * (1 + 0.1 * response(t_nadir))
    assert rows[-1]["f_nadir_hz"] == pytest.approx(nadir_hz, abs=2e-5)  # sampled every 10 ms
    assert rows[-1]["f_nadir_hz"] == pytest.approx(F0 * (1 - 0.006150), abs=1e-4)
    settled = F0 * (1 - 0.1 / (1.0 + 1 / 0.05))
    assert rows[-1]["f_hz"] == pytest.approx(settled, abs=1e-5)
    assert rows[0]["rocof_hz_s"] == pytest.approx(-0.1 * F0 / (2 * 5.0), rel=1e-12)  # −ΔP f0 / 2H


def test_reheat_step_response_matches_anderson_mirheydar():
    area = _area(h_s=4.0, d_pu=1.0, r_pu=0.05, t_gov_s=0.0, t_ch_s=0.0, f_hp_frac=0.3, t_reheat_s=8.0)
    area.p_ref_mw = 0.0
    rows = [area.step(k * 0.1, 0.1, 100.0, 0.0) for k in range(600)]
    response, t_nadir = _reheat(4.0, 1.0, 0.05, 0.3, 8.0)
    for k in (5, 24, 100, 599):
        assert rows[k]["f_dev_hz"] == pytest.approx(0.1 * response(k * 0.1) * F0, abs=1e-6), k
    assert rows[-1]["f_nadir_hz"] == pytest.approx(F0 * (1 + 0.1 * response(t_nadir)), abs=1e-5)


def test_the_result_does_not_depend_on_the_scenario_step():
    """Internal sub-steps of 10 ms: 1 s and 0.1 s steps see the same trajectory at whole seconds,
    and a trip inside a step starts at its own time."""
    a = _area(gen_trips=[[2.5, 50.0]])
    b = _area(gen_trips=[[2.5, 50.0]])
    coarse = [a.step(float(k), 1.0, 0.0, 0.0) for k in range(20)]
    fine = [b.step(k / 10, 0.1, 0.0, 0.0) for k in range(200)]
    for k in range(20):
        assert coarse[k]["f_hz"] == pytest.approx(fine[10 * k]["f_hz"], abs=1e-9)
    assert coarse[-1]["f_nadir_hz"] == pytest.approx(fine[-1]["f_nadir_hz"], abs=1e-9)
    assert coarse[2]["f_hz"] == F0 and coarse[3]["f_hz"] < F0  # nothing before 2.5 s


def test_the_ercot_preset_settles_at_its_bias_and_agc_restores_60_hz():
    """β = 750 MW/0.1 Hz: a 1,500 MW trip settles 0.2 Hz low; with AGC the frequency returns."""
    area = _area(preset="ercot", f_nominal_hz=None, s_base_mw=None, gen_trips=[[0.0, 1500.0]])
    rows = [area.step(float(k), 1.0, 0.0, 0.0) for k in range(120)]
    assert rows[-1]["f_hz"] == pytest.approx(60.0 - 0.2, abs=2e-3)
    assert rows[-1]["p_mech_mw"] == pytest.approx(1500.0 - 0.2 / 60.0 * 60_000.0, abs=5.0)  # the rest: damping
    assert rows[-1]["f_nadir_hz"] < rows[-1]["f_hz"] - 0.05  # overshoot below the settled value
    agc = _area(preset="ercot", f_nominal_hz=None, s_base_mw=None, gen_trips=[[0.0, 1500.0]], agc_ki_per_s=0.02)
    late = [agc.step(float(k), 1.0, 0.0, 0.0) for k in range(900)][-1]
    assert abs(late["f_hz"] - 60.0) < 0.01 and late["p_agc_mw"] > 1000.0


def test_load_loss_mirrors_a_load_step_and_sites_scale():
    """Linear: losing load raises frequency by the mirror image; n_sites multiplies the input."""
    up, down = _area(), _area(n_sites=3.0)
    r_up = _run(up, 30.0, 20.0, 0.5)
    r_down = _run(down, -10.0, 20.0, 0.5)
    for x, y in zip(r_up, r_down):
        assert x["f_dev_hz"] == pytest.approx(-y["f_dev_hz"], abs=1e-12)
    assert r_down[-1]["f_zenith_hz"] - F0 == pytest.approx(F0 - r_up[-1]["f_nadir_hz"], abs=1e-12)


def test_deadband_and_reserve_limit_the_governors():
    free = _run(_area(), 100.0, 120.0, 1.0)[-1]
    dead = _run(_area(deadband_hz=0.036), 100.0, 120.0, 1.0)[-1]
    capped = _run(_area(reserve_mw=20.0), 100.0, 120.0, 1.0)[-1]
    assert dead["f_hz"] < free["f_hz"] and capped["f_hz"] < dead["f_hz"]
    assert capped["p_mech_mw"] == pytest.approx(20.0, abs=1e-3)


#: preset -> its documented frequency response β (module docstring). [MW/0.1 Hz]
BETA_MW_PER_0P1HZ = {"ercot": 750.0, "eastern": 2500.0, "western": 1500.0, "europe_50hz": 1800.0}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_settles_where_its_deadband_and_beta_say(preset):
    """A step of 1 % of the base, beyond every deadband: ``Δf_ss = −(ΔP + db/R)/(D + 1/R)`` (pu),
    and β = (D + 1/R) S_base / f0 is the documented MW/0.1 Hz; without the deadband it is −ΔP/β."""
    p = AreaParams.model_validate({"preset": preset})
    assert p.deadband_hz > 0, "every preset carries its interconnection's deadband"
    beta_pu = p.d_pu + 1.0 / p.r_pu
    assert beta_pu * p.s_base_mw / p.f_nominal_hz / 10.0 == pytest.approx(BETA_MW_PER_0P1HZ[preset], rel=1e-9)
    step_mw = 0.01 * p.s_base_mw
    db_pu = p.deadband_hz / p.f_nominal_hz
    want_hz = -(0.01 + db_pu / p.r_pu) / beta_pu * p.f_nominal_hz
    for deadband, want in ((None, want_hz), (0.0, -0.01 / beta_pu * p.f_nominal_hz)):
        area = Area(AreaParams.model_validate({"preset": preset, "deadband_hz": deadband, "gen_trips": [[0.0, step_mw]]}))
        last = [area.step(float(k), 1.0, 0.0, 0.0) for k in range(150)][-1]
        assert last["f_dev_hz"] == pytest.approx(want, rel=2e-3), (preset, deadband)


def test_presets_fill_only_what_is_not_given():
    p = AreaParams.model_validate({"preset": "europe_50hz", "h_s": 3.0})
    assert p.f_nominal_hz == 50.0 and p.h_s == 3.0 and p.s_base_mw == 300_000.0
    with pytest.raises(ValueError, match="before the start"):
        AreaParams.model_validate({"gen_trips": [[-1.0, 10.0]]})
    assert "f_hz" in FrequencySim.META["models"]["Area"]["attrs"]
