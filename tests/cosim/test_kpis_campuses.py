"""Several campuses through one disturbance (cosim/kpis/campuses.py): the matrix pencil's modes against
analytical damped sinusoids, and the block's cease / return / recovery times against hand-built shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosim.kpis._block import KpiInput
from cosim.kpis.campuses import BLOCK, dominant_mode, matrix_pencil
from cosim.roles import RunRoles

DT_S = 0.1
ROOT = Path(__file__).resolve().parents[2]


def _ringdown(zeta: float, f_n_hz: float, n: int = 70, amp: float = 0.02, offset: float = 60.0) -> np.ndarray:
    """``offset + amp e^{−ζ ω_n t} cos(ω_d t + 0.3)``: a second-order mode, ``ω_d = ω_n √(1 − ζ²)``
    (the damped response of any textbook, e.g. Kundur, Power System Stability and Control, 1994, §12.1)."""
    t = np.arange(n) * DT_S
    w_n = 2 * np.pi * f_n_hz
    return offset + amp * np.exp(-zeta * w_n * t) * np.cos(w_n * np.sqrt(1 - zeta**2) * t + 0.3)


@pytest.mark.parametrize(("zeta", "f_n_hz"), [(0.02, 0.4), (0.05, 0.7), (0.15, 1.2), (0.3, 2.0)])
def test_pencil_recovers_a_noise_free_mode_exactly(zeta, f_n_hz):
    mode = dominant_mode(_ringdown(zeta, f_n_hz), DT_S)
    assert mode["damping_frac"] == pytest.approx(zeta, abs=1e-6)
    assert mode["freq_hz"] == pytest.approx(f_n_hz * np.sqrt(1 - zeta**2), abs=1e-6)  # the damped frequency
    assert mode["amplitude"] == pytest.approx(0.02, rel=1e-4)


@pytest.mark.parametrize("seed", range(20))
def test_pencil_in_noise_stays_within_a_stated_band(seed):
    """2.5 % white noise (σ = 0.5 mHz on a 20 mHz mode): ζ within 0.01 and f within 0.01 Hz."""
    y = _ringdown(0.08, 0.7) + np.random.default_rng(seed).normal(0.0, 0.0005, 70)
    mode = dominant_mode(y, DT_S)
    assert mode["damping_frac"] == pytest.approx(0.08, abs=0.01)
    assert mode["freq_hz"] == pytest.approx(0.7 * np.sqrt(1 - 0.08**2), abs=0.01)


def test_pencil_ranks_two_modes_by_amplitude_and_keeps_both():
    y = _ringdown(0.05, 0.6, amp=0.03) + _ringdown(0.1, 1.5, amp=0.01, offset=0.0)
    modes = matrix_pencil(y - y.mean(), DT_S, order=5)
    oscillating = [m for m in modes if m["freq_hz"] > 0.1]
    assert [round(m["freq_hz"], 2) for m in oscillating[:2]] == [round(0.6 * np.sqrt(1 - 0.05**2), 2),
                                                                  round(1.5 * np.sqrt(1 - 0.1**2), 2)]
    assert dominant_mode(y, DT_S)["damping_frac"] == pytest.approx(0.05, abs=1e-3)


def test_a_flat_or_short_signal_has_no_mode():
    assert dominant_mode(np.full(50, 60.0), DT_S) is None
    assert matrix_pencil(np.array([1.0, 2.0]), DT_S) == []


def _input(frame: pd.DataFrame) -> KpiInput:
    frame.index = pd.date_range("2024-01-01", periods=len(frame), freq=pd.Timedelta(seconds=DT_S), tz="UTC")
    cols = list(BLOCK.columns(list(frame.columns), RunRoles()))
    return KpiInput(ts=frame[cols], dt_h=DT_S / 3600.0, step_s=DT_S, roles=RunRoles(), links={})


def _share(n: int, cease: int, low: float, recon: int, ramp: int, settled: float = 1.0) -> np.ndarray:
    s = np.ones(n)
    s[cease:recon] = low
    s[recon:recon + ramp] = np.linspace(low, settled, ramp + 1)[1:]
    s[recon + ramp:] = settled
    return s


def test_cease_return_recovery_and_mode_by_hand():
    n = 80
    a = _share(n, 10, 0.0, 16, 10)              # all ceases at 1.0 s, ramps back 1.6-2.5 s
    b = _share(n, 10, 0.5, 30, 5, settled=0.9)  # half ceases, only 90 % returns: never the pre-fault MW
    vm = np.where(np.arange(n) == 10, 0.4, 1.0)
    f = np.concatenate([np.full(11, 60.0), _ringdown(0.05, 0.7, n=n - 11)])
    frame = pd.DataFrame({"a.p_connected_frac": a, "a.p_served_mw": 100 * a, "a.vm_min_pu": vm,
                          "b.p_connected_frac": b, "b.p_served_mw": 200 * b, "b.vm_min_pu": vm,
                          "c.p_connected_frac": np.ones(n), "c.p_served_mw": np.full(n, 50.0),
                          "grid.f_hz": f, "grid.f_nadir_hz": np.full(n, 59.9)})
    out = BLOCK.compute(_input(frame))
    sa, sb, sc = (out["campuses"][k] for k in "abc")
    assert sc == {"ceased": False}
    assert sa["t_cease_s"] == pytest.approx(1.0) and sa["ceased_max_frac"] == pytest.approx(1.0)
    assert sa["t_recon_start_s"] == pytest.approx(1.6) and sa["t_back_s"] == pytest.approx(2.5)
    assert sa["t_recover_s"] == pytest.approx(1.5) and sa["recovered"]
    assert sb["ceased_max_frac"] == pytest.approx(0.5) and sb["settled_frac"] == pytest.approx(0.9)
    assert sb["t_back_s"] == pytest.approx(3.4) and sb["recovered"] is False and sb["t_recover_s"] is None
    total = out["campuses_total"]
    assert (total["n_campuses"], total["n_ceased"]) == (3, 2)
    assert total["p_pre_mw"] == pytest.approx(350.0) and total["p_lost_max_mw"] == pytest.approx(200.0)
    assert total["recovered"] is False                    # b stays 20 MW (5.7 %) short
    assert total["f_coi_nadir_hz"] == pytest.approx(59.9)  # the Grid's sub-step nadir is below the samples
    assert total["mode_window_s"] == pytest.approx((n - 11) * DT_S)  # from the sample after the dip
    assert total["mode_damping_frac"] == pytest.approx(0.05, abs=1e-3)
    assert total["mode_freq_hz"] == pytest.approx(0.7 * np.sqrt(1 - 0.05**2), abs=1e-3)


def test_no_connected_share_no_block():
    assert BLOCK.compute(_input(pd.DataFrame({"grid.f_hz": [60.0, 60.0], "grid.f_nadir_hz": [60.0, 60.0]}))) == {}


def test_the_mode_band_and_dip_are_the_scenarios_parameters():
    n = 60
    f = np.concatenate([np.full(11, 60.0), _ringdown(0.05, 0.7, n=n - 11)])
    frame = pd.DataFrame({"a.p_connected_frac": _share(n, 10, 0.0, 16, 10), "a.vm_min_pu": np.where(
        np.arange(n) == 10, 0.85, 1.0), "grid.f_hz": f, "grid.f_nadir_hz": np.full(n, 59.99)})
    inp = _input(frame)
    assert BLOCK.compute(inp)["campuses_total"]["mode_window_s"] == pytest.approx((n - 11) * DT_S)
    shifted = KpiInput(ts=inp.ts, dt_h=inp.dt_h, step_s=DT_S, roles=RunRoles(),
                       params={"campuses": {"mode_band_hz": (1.0, 2.5), "dip_pu": 0.8}})
    total = BLOCK.compute(shifted)["campuses_total"]
    assert "mode_freq_hz" not in total                       # the 0.7 Hz mode is outside 1-2.5 Hz
    assert total["mode_window_s"] == pytest.approx((n - 11) * DT_S)  # 0.85 pu is no dip at 0.8: after the cease


@pytest.mark.parametrize(("table", "key"), [("mode_band_hz = [2.0, 1.0]", "mode_band_hz"), ("dip_pu = 1.2", "dip_pu")])
def test_bad_campuses_parameters_are_one_problem_naming_the_key(tmp_path, table, key):
    from cosim.errors import ScenarioError
    from cosim.scenario import load_scenario

    text = (ROOT / "scenarios" / "npcc_perc1_campuses.toml").read_text()
    path = tmp_path / "s.toml"
    path.write_text(text.replace('sim = "tgrid"\nmodel = "Grid"', 'sim = "tgrid"\nmodel = "Grid"\n\n[kpis.campuses]\n'
                                 + table, 1).replace('"data/transmission/', f'"{ROOT}/scenarios/data/transmission/'))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert len(err.value.problems) == 1 and key in str(err.value.problems[0])


@pytest.fixture(scope="module")
def npcc_run(tmp_path_factory):
    import cosim

    result = cosim.run(ROOT / "scenarios" / "npcc_perc1_campuses.toml", out_dir=tmp_path_factory.mktemp("npcc"),
                       overrides={"scenario.engine": "direct"})
    assert result.ok, result.reason
    return result


def test_npcc_campuses_cease_by_their_own_thresholds(npcc_run):
    """PERC1 (PowerWorld's load characteristic): a campus whose lowest voltage stays above Vt1 does not cease;
    one that falls to or below Vt0 ceases its whole Fcease; between them, a share between 0 and Fcease."""
    import tomllib

    ts = pd.read_parquet(Path(npcc_run.run_dir) / "timeseries.parquet")
    scn = tomllib.loads((ROOT / "scenarios" / "npcc_perc1_campuses.toml").read_text())
    kpis = npcc_run.kpis["campuses"]
    for site, entry in kpis.items():
        perc1 = scn["entities"][site]["perc1"]
        v_min, ceased = float(ts[f"{site}.vm_min_pu"].min()), 1.0 - float(ts[f"{site}.p_connected_frac"].min())
        assert entry["ceased"] == (v_min < perc1["vt1_pu"])
        if v_min <= perc1["vt0_pu"]:
            assert ceased == pytest.approx(perc1.get("fcease_frac", 1.0), abs=1e-6)
        elif v_min < perc1["vt1_pu"]:
            assert 0.0 < ceased < perc1.get("fcease_frac", 1.0)
    total = npcc_run.kpis["campuses_total"]
    assert total["n_ceased"] == sum(e["ceased"] for e in kpis.values()) >= 2  # the one fault reaches several
    assert total["p_lost_max_mw"] == pytest.approx(sum(e.get("p_pre_mw", 0) - e.get("p_min_mw", 0)
                                                       for e in kpis.values()), rel=1e-6)  # all cease at 1.0 s
    assert 0.1 <= total["mode_freq_hz"] <= 2.5 and 0.0 < total["mode_damping_frac"] < 1.0


def test_a_ride_through_site_is_read_by_its_grid_draw():
    """A RideThrough records p_mw as its grid draw (its share already applied) and no p_served_mw."""
    n = 40
    share = _share(n, 10, 0.3, 15, 5)
    out = BLOCK.compute(_input(pd.DataFrame({"ups.p_connected_frac": share, "ups.p_mw": 200.0 * share})))
    site = out["campuses"]["ups"]
    assert site["p_pre_mw"] == pytest.approx(200.0) and site["p_min_mw"] == pytest.approx(60.0)
    assert out["campuses_total"]["p_lost_max_mw"] == pytest.approx(140.0)
    assert "f_coi_nadir_hz" not in out["campuses_total"]  # no system frequency recorded
