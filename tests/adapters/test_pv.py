"""PV plant: pvlib chain checks against pvlib's own ModelChain, and adapter behaviour.

The reference is ``pvlib.modelchain.ModelChain`` (Holmgren et al. 2018, JOSS 3(29) 884)
with the same PVWatts parameters, on a clear-sky day (Ineichen/Perez clear sky with
Linke turbidity from pvlib's climatology) at Greensboro, NC (36.10 N, 79.95 W, 273 m).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pvlib import location, modelchain, pvsystem, temperature

from cosim.adapters.pv import PvPlant, PvPlantParams, PvSim

SITE = dict(latitude_deg=36.10, longitude_deg=-79.95, altitude_m=273.0)


def _clear_day(day="2024-06-21", freq="15min") -> pd.DataFrame:
    times = pd.date_range(f"{day}T00:00Z", periods=int(pd.Timedelta("1D") / pd.Timedelta(freq)), freq=freq)
    site = location.Location(SITE["latitude_deg"], SITE["longitude_deg"], "UTC", SITE["altitude_m"])
    sky = site.get_clearsky(times, model="ineichen")
    return pd.DataFrame({"ghi_w_m2": sky["ghi"], "dni_w_m2": sky["dni"], "dhi_w_m2": sky["dhi"],
                         "t_dry_c": 30.0, "wind_m_s": 2.0}, index=times)


def _modelchain_ac_w(params: PvPlantParams, weather: pd.DataFrame) -> pd.Series:
    """pvlib's ModelChain with the same PVWatts chain, in watts."""
    if params.tracking == "fixed":
        mount = pvsystem.FixedMount(params.tilt_deg, params.azimuth_deg)
    else:
        mount = pvsystem.SingleAxisTrackerMount(params.axis_tilt_deg, params.axis_azimuth_deg,
                                                params.max_angle_deg, True, params.gcr_frac)
    array = pvsystem.Array(mount, module_parameters={"pdc0": params.p_dc_mw * 1e6, "gamma_pdc": params.gamma_pdc_per_c},
                           temperature_model_parameters=temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"][params.racking],
                           albedo=params.albedo_frac)
    system = pvsystem.PVSystem(arrays=[array], inverter_parameters={
        "pdc0": params.p_ac_mw * 1e6 / params.eta_inv_nom_frac, "eta_inv_nom": params.eta_inv_nom_frac},
        losses_parameters={})
    site = location.Location(SITE["latitude_deg"], SITE["longitude_deg"], "UTC", SITE["altitude_m"])
    chain = modelchain.ModelChain(system, site, aoi_model="physical", spectral_model="no_loss",
                                  temperature_model="sapm", dc_model="pvwatts", ac_model="pvwatts",
                                  losses_model="no_loss", transposition_model=params.transposition)
    frame = weather.rename(columns={"ghi_w_m2": "ghi", "dni_w_m2": "dni", "dhi_w_m2": "dhi",
                                    "t_dry_c": "temp_air", "wind_m_s": "wind_speed"})
    chain.run_model(frame)
    return chain.results.ac


@pytest.mark.parametrize("tracking", ["fixed", "single_axis"])
def test_clear_sky_day_energy_matches_modelchain(tracking):
    """Daily AC energy equals ModelChain's within 0.01 % (same PVWatts chain, no DC losses).

    The residual (~1.5e-5) is refraction: ModelChain places the sun using the weather's air
    temperature, our precomputed geometry pvlib's default 12 °C.

    DC/AC 1.3 so the inverter clips around noon: clipping is part of what is compared.
    """
    params = PvPlantParams(**SITE, p_dc_mw=1.3, p_ac_mw=1.0, tracking=tracking, dc_loss_frac=0.0)
    weather = _clear_day()
    ours = PvPlant(params).simulate(weather)
    ref_w = _modelchain_ac_w(params, weather)
    e_ours_mwh = ours["p_ac_mw"].sum() * 0.25
    e_ref_mwh = ref_w.clip(lower=0).sum() * 0.25 / 1e6
    assert e_ref_mwh > 5.0  # a clear June day: > 5 MWh per MW_ac
    assert e_ours_mwh == pytest.approx(e_ref_mwh, rel=1e-4)
    assert ours["p_ac_mw"].max() <= params.p_ac_mw + 1e-12  # inverter clipping
    assert ours["p_clip_mw"].max() > 0


def test_dc_losses_and_temperature_derating():
    weather = _clear_day()
    base = PvPlantParams(**SITE, p_dc_mw=1.0, p_ac_mw=1.0, dc_loss_frac=0.0)
    lossy = base.model_copy(update={"dc_loss_frac": 0.14})
    dc0 = PvPlant(base).simulate(weather)["p_dc_mw"]
    dc1 = PvPlant(lossy).simulate(weather)["p_dc_mw"]
    np.testing.assert_allclose(dc1, dc0 * 0.86, rtol=1e-12)
    hot = PvPlant(base).simulate(weather.assign(t_dry_c=40.0))
    cool = PvPlant(base).simulate(weather.assign(t_dry_c=10.0))
    # SAPM: cell temperature rises one for one with air temperature; PVWatts: P ∝ 1 + γ (T_cell − 25 °C)
    noon = hot["p_dc_mw"].idxmax()
    assert hot.loc[noon, "t_cell_c"] - cool.loc[noon, "t_cell_c"] == pytest.approx(30.0)
    gamma = base.gamma_pdc_per_c
    want = (1 + gamma * (hot.loc[noon, "t_cell_c"] - 25)) / (1 + gamma * (cool.loc[noon, "t_cell_c"] - 25))
    assert hot.loc[noon, "p_dc_mw"] / cool.loc[noon, "p_dc_mw"] == pytest.approx(want, rel=1e-9)
    assert want < 0.9  # ~10 % lost to 30 °C of heat


@pytest.mark.parametrize("tracking", ["fixed", "single_axis"])
@pytest.mark.parametrize("model", ["haydavies", "isotropic", "reindl", "perez", "klucher"])
def test_plane_irradiance_is_get_total_irradiances_bit_for_bit(tracking, model):
    """The time-only terms (angle of incidence, Hay-Davies projection ratio) are computed once
    per run; the irradiance on the plane must still be exactly pvlib's
    ``get_total_irradiance``, over a whole day as arrays and step by step as scalars."""
    from pvlib import irradiance

    plant = PvPlant(PvPlantParams(**SITE, p_dc_mw=1.0, p_ac_mw=1.0, tracking=tracking, transposition=model))
    weather = _clear_day(freq="10min")
    geo = plant.geometry(weather.index)
    ghi, dni, dhi = (weather[c] for c in ("ghi_w_m2", "dni_w_m2", "dhi_w_m2"))

    def reference(g, ghi_, dni_, dhi_):
        return irradiance.get_total_irradiance(g["surface_tilt"], g["surface_azimuth"], g["apparent_zenith"],
                                               g["azimuth"], dni_, ghi_, dhi_, dni_extra=g["dni_extra"],
                                               airmass=g["airmass"], albedo=0.25, model=model)

    got, want = plant.poa_irradiance(geo, ghi, dni, dhi), reference(geo, ghi, dni, dhi)
    for key in ("poa_global", "poa_direct", "poa_diffuse"):
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]))
    for k in range(0, len(geo), 7):
        if ghi.iloc[k] > 0:  # klucher divides by ghi (a scalar 0 raises in pvlib)
            row = {c: float(geo[c].iloc[k]) for c in geo.columns}
            args = (float(ghi.iloc[k]), float(dni.iloc[k]), float(dhi.iloc[k]))
            assert plant.poa_irradiance(row, *args)["poa_global"] == reference(row, *args)["poa_global"]


def _run_sim(params: dict, weather: pd.DataFrame, step_s: int, limit_mw=None) -> pd.DataFrame:
    sim = PvSim()
    sim.init("pv", time_resolution=1.0, start_utc=weather.index[0].isoformat(), step_s=step_s,
             duration_s=86_400, seed=1)
    sim.create(1, "PvPlant", eid="pv", **params)
    rows = []
    for t in range(0, 86_400, step_s):
        hour = weather.iloc[t // 3600]
        inputs = {"pv": {k: {"w": float(hour[k])} for k in weather.columns}}
        if limit_mw is not None:
            inputs["pv"]["p_limit_mw"] = {"ctl": limit_mw}
        sim.step(t, inputs, 86_400)
        rows.append(dict(sim.get_data({"pv": ["p_mw", "p_avail_mw", "p_curtailed_mw"]})["pv"]))
    return pd.DataFrame(rows)


def test_adapter_steps_match_the_chain_at_mid_step():
    """Stepping the adapter hourly with hourly weather = the chain with the sun at half past."""
    weather = _clear_day(freq="1h")
    params = dict(**SITE, p_dc_mw=1.2, p_ac_mw=1.0)
    got = _run_sim(params, weather, 3600)
    mid = weather.set_axis(weather.index + pd.Timedelta("30min"))
    want = PvPlant(PvPlantParams(**params)).simulate(mid)["p_ac_mw"].to_numpy()
    np.testing.assert_allclose(got["p_mw"].to_numpy(), want, rtol=1e-6, atol=1e-9)


def test_curtailment_input_limits_output():
    weather = _clear_day(freq="1h")
    got = _run_sim(dict(**SITE, p_dc_mw=1.2, p_ac_mw=1.0), weather, 3600, limit_mw=0.4)
    assert got["p_mw"].max() == pytest.approx(0.4)
    np.testing.assert_allclose(got["p_mw"] + got["p_curtailed_mw"], got["p_avail_mw"])
    assert got["p_curtailed_mw"].sum() > 0


def test_night_is_zero_and_params_are_validated():
    weather = _clear_day(freq="1h")
    out = PvPlant(PvPlantParams(**SITE, p_dc_mw=1.0, p_ac_mw=1.0)).simulate(weather)
    assert out["p_ac_mw"].iloc[5] == 0.0  # 05:00 UTC is midnight local
    with pytest.raises(ValueError, match="p_dc_mw"):
        PvPlantParams(**SITE, p_dc_mw=-1.0, p_ac_mw=1.0)


@pytest.mark.parametrize("tracking", ["fixed", "single_axis"])
@pytest.mark.parametrize("model", ["haydavies", "isotropic", "reindl", "perez", "klucher"])
def test_a_dark_step_skips_the_chain_with_its_exact_outputs(tracking, model):
    """With no irradiance the adapter skips pvlib: its outputs must be the full chain's exactly
    (0 W, the cell at air temperature), at night and by day, for every air temperature and wind
    tried (klucher's chain divides by ghi, so it is evaluated on numpy zeros, as arrays are)."""
    params = dict(**SITE, p_dc_mw=1.0, p_ac_mw=1.0, tracking=tracking, transposition=model)
    sim = PvSim()
    sim.init("pv", time_resolution=1.0, start_utc="2024-07-15T00:00:00+00:00", step_s=3600, duration_s=86_400, seed=1)
    sim.create(1, "PvPlant", eid="pv", **params)
    plant = PvPlant(PvPlantParams(**params))
    attrs = ["p_mw", "p_avail_mw", "p_dc_mw", "p_clip_mw", "poa_w_m2", "t_cell_c"]
    for k, (t_air, wind) in enumerate([(-10.0, 0.0), (0.0, 1.0), (25.0, 7.5), (41.3, 3.0), (20, 0)] * 4):
        t = 3600 * (k % 24)
        inputs = {"pv": {"ghi_w_m2": {"w": 0.0}, "dni_w_m2": {"w": 0.0}, "dhi_w_m2": {"w": 0.0},
                         "t_dry_c": {"w": t_air}, "wind_m_s": {"w": wind}}}
        sim.step(t, inputs, 86_400)
        got = sim.get_data({"pv": attrs})["pv"]
        geo = plant.geometry(pd.DatetimeIndex([pd.Timestamp("2024-07-15T00:30Z") + pd.Timedelta(hours=k % 24)]))
        zero = np.zeros(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = plant.power(geo, zero, zero, zero, np.full(1, float(t_air)), np.full(1, float(wind)))
        assert got["p_mw"] == got["p_avail_mw"] == float(want["p_ac_mw"][0]) == 0.0
        for attr, key in (("p_dc_mw", "p_dc_mw"), ("p_clip_mw", "p_clip_mw"), ("poa_w_m2", "poa_w_m2"),
                          ("t_cell_c", "t_cell_c")):
            assert got[attr] == float(np.asarray(want[key])[0]), (attr, t_air, wind)


@pytest.mark.parametrize("tracking", ["fixed", "single_axis"])
@pytest.mark.parametrize("model", ["haydavies", "isotropic", "reindl", "perez", "klucher"])
def test_steps_evaluated_as_a_block_are_the_chain_of_each_step_bit_for_bit(tracking, model):
    """While the weather holds (hourly TMY3 under 5-minute steps) the adapter evaluates the chain
    for the steps ahead as arrays: each step's outputs must be exactly the scalar chain's for that
    step. One day of every other month of pvlib's bundled TMY3 year (Greensboro, NC; NREL, Wilcox & Marion
    2008), every mounting and transposition model; the test also checks that blocks of several
    steps were used, and that weather changing every step (no block) gives the same numbers.

    Klucher's reference is the chain on one-step arrays, as ModelChain runs it on a series: on Python
    floats it raises ZeroDivisionError at ghi = 0 < dni (34 dusk hours of this TMY3 year), and its
    powers ``x ** 3`` of floats are libm's, not numpy's (over the whole year at 1-minute steps 39
    fixed-tilt and 49 tracker steps of 278,880 lit ones differ by an ulp from the float evaluation;
    the other models: none; ``bench/bench_pv_block.py --year-check`` runs that comparison)."""
    import pathlib

    import pvlib

    data, _ = pvlib.iotools.read_tmy3(pathlib.Path(pvlib.__file__).parent / "data" / "723170TYA.CSV",
                                      map_variables=True)
    hours = data[["ghi", "dni", "dhi", "temp_air", "wind_speed"]].to_numpy(float)
    params = dict(**SITE, p_dc_mw=1.2, p_ac_mw=1.0, tracking=tracking, transposition=model)
    step_s, keys = 300, ("p_avail_mw", "p_dc_mw", "p_clip_mw", "poa_w_m2", "t_cell_c")
    chain_keys = ("p_ac_mw", "p_dc_mw", "p_clip_mw", "poa_w_m2", "t_cell_c")
    sim = PvSim()
    sim.init("pv", time_resolution=1.0, start_utc="2024-01-01T00:00:00+00:00", step_s=step_s,
             duration_s=366 * 86_400, seed=1)
    sim.create(1, "PvPlant", eid="pv", **params)
    geo, lengths, n_lit = sim.entities["pv"], set(), 0
    for month in range(1, 12, 2):  # Feb, Apr, ..., Dec
        day = 30 * month + 14
        for k in range(day * 288, (day + 1) * 288):
            hour = hours[k * step_s // 3600]
            jitter = 1e-9 * (k % 2) if month == 11 else 0.0  # December: the weather changes every step
            inputs = dict(zip(("ghi_w_m2", "dni_w_m2", "dhi_w_m2", "t_dry_c", "wind_m_s"),
                              (float(hour[0]) + (jitter if hour[0] else 0.0), *map(float, hour[1:]))))
            sim.time_ticks = k * step_s
            got = sim.advance(geo, k * step_s, inputs)
            if not hour[:3].any():
                continue
            n_lit += 1
            lengths.add(geo.block_end - geo.block_start)
            row = sim._geometry_row(geo, k * step_s)
            if model != "klucher":
                want = geo.plant.power(row, *inputs.values())
            else:  # the chain on one-step arrays, as ModelChain runs it on a series (see the docstring)
                with np.errstate(divide="ignore", invalid="ignore"):
                    want = geo.plant.power({key: np.array([v]) for key, v in row.items()},
                                           *(np.array([v]) for v in inputs.values()))
                want = {key: np.asarray(v)[0] for key, v in want.items()}
            assert [got[key] for key in keys] == [float(want[key]) for key in chain_keys], (month, k)
    assert n_lit > 500 and max(lengths) >= 8 and 1 in lengths, (n_lit, sorted(lengths))


def _geometry_rows(params: dict, start: str, prepared: list[str] | None = None) -> np.ndarray:
    """The geometry rows a one-day run of 5-minute steps from ``start`` sets up (``prepared``:
    the starts it is told of first, as a gym tells it its start days)."""
    sim = PvSim()
    sim.init("pv", time_resolution=1.0, start_utc=start, step_s=300, duration_s=86_400, seed=1)
    sim.create(1, "PvPlant", eid="pv", **params)
    if prepared is not None:
        sim.prepare_starts([pd.Timestamp(s).to_pydatetime() for s in prepared])
    sim.setup_done()
    return np.array(sim.entities["pv"].rows)


@pytest.mark.parametrize("tracking", ["fixed", "single_axis"])
def test_geometry_prepared_for_many_starts_is_each_runs_own_bit_for_bit(tracking, monkeypatch):
    """``prepare_starts`` computes the geometry of every start day of rl_site's window (and its
    held-out week, a call of its own: a week after the window) at once: a run on any of those days
    must get the rows its own computation gives, to the bit."""
    from cosim.adapters import pv

    prepared, empty = pv._GeometryAhead(), pv._GeometryAhead()
    params = dict(**SITE, p_dc_mw=2.4, p_ac_mw=2.0, tilt_deg=25.0, tracking=tracking)
    window = [f"{day:%Y-%m-%d}T04:00:00+00:00" for day in pd.date_range("2024-06-03", "2024-07-28")]
    held_out = [f"2024-08-{d:02d}T04:00:00+00:00" for d in range(5, 12)]
    calls = []
    geometry = PvPlant.geometry
    monkeypatch.setattr(PvPlant, "geometry", lambda self, times: calls.append(len(times)) or geometry(self, times))
    monkeypatch.setattr(pv, "GEOMETRY_AHEAD", prepared)
    _geometry_rows(params, window[0], window + held_out)
    assert sorted(calls) == [7 * 288, 56 * 288]  # the held-out week, the window (the run on its first day among them)
    for start in window + held_out:
        calls.clear()
        monkeypatch.setattr(pv, "GEOMETRY_AHEAD", prepared)
        got = _geometry_rows(params, start)
        assert not calls  # taken from the prepared rows
        monkeypatch.setattr(pv, "GEOMETRY_AHEAD", empty)
        want = _geometry_rows(params, start)
        assert calls == [288]  # its own
        np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64), err_msg=start)


def test_a_start_off_the_prepared_grid_computes_its_own_geometry(monkeypatch):
    """A start half a step off the prepared days, or a run of another length, is not served from them."""
    from cosim.adapters import pv

    monkeypatch.setattr(pv, "GEOMETRY_AHEAD", pv._GeometryAhead())
    params = dict(**SITE, p_dc_mw=2.4, p_ac_mw=2.0)
    _geometry_rows(params, "2024-06-03T04:00:00+00:00", ["2024-06-03T04:00:00+00:00", "2024-06-04T04:00:00+00:00"])
    off = "2024-06-04T04:02:30+00:00"
    got = _geometry_rows(params, off)
    monkeypatch.setattr(pv, "GEOMETRY_AHEAD", pv._GeometryAhead())
    np.testing.assert_array_equal(got, _geometry_rows(params, off))
    assert not np.array_equal(got, _geometry_rows(params, "2024-06-04T04:00:00+00:00"))


def test_the_geometry_prepared_is_bounded(monkeypatch):
    """At most ``MAX_ROWS`` times are prepared per plant, step and run length: the start days beyond
    compute their own geometry."""
    from cosim.adapters import pv

    ahead = pv._GeometryAhead()
    ahead.MAX_ROWS = 10 * 288
    monkeypatch.setattr(pv, "GEOMETRY_AHEAD", ahead)
    params = dict(**SITE, p_dc_mw=2.4, p_ac_mw=2.0)
    window = [f"{day:%Y-%m-%d}T04:00:00+00:00" for day in pd.date_range("2024-06-03", "2024-06-30")]
    _geometry_rows(params, window[0], window)
    plant, first = PvPlant(PvPlantParams(**params)), pd.Timestamp("2024-06-03T04:02:30Z")
    kept = [ahead.get(plant, 300, 288, first + pd.Timedelta(days=d)) is not None for d in range(len(window))]
    assert kept == [True] * 10 + [False] * (len(window) - 10)
