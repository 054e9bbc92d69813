"""Hosting capacity by bisection over runs, checked against answers computed without cosim.

* A two-bus feeder (source at 20 kV, one line R = 2 Ω, X = 3 Ω, no shunt capacitance, a
  unity-power-factor load): the receiving-end voltage V of a load P solves
  V⁴ + (2PR − Vs²)V² + P²(R² + X²) = 0 (the classic two-bus power-flow equation, e.g. Kundur,
  *Power System Stability and Control*, 1994, §2.10 / Kersting, *Distribution System
  Modeling and Analysis*, ch. 6), so the largest P keeping V ≥ 0.95·Vs is its root in P, and
  the thermal limit is the P whose current P / (√3·V) equals the line's rating.
* The IEEE 33-bus feeder: pandapower's own ``runpp`` bisected independently.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandapower as pp
import pytest
from scipy.optimize import brentq

from cosim.studies.hosting import (
    Limits,
    _coordinates,
    bus_positions,
    feeder_buses,
    hosting_capacity,
    resolve_setup,
)

R_OHM, X_OHM, VS_KV = 2.0, 3.0, 20.0
TOL_MW = 0.05
#: the scan's step on these feeders without regulators (violations grow with the load): a coarse
#: scan keeps the runs few; the answer is the bisection's, to TOL_MW
STEP = {"step_mw": 2.0}

SCENARIO = """
[scenario]
name = "hc"
start = 2024-07-15T00:00:00Z
duration_s = 60
step_s = 60

[sims.grid]
adapter = "grid"
network = "{network}"

[entities.pcc]
sim = "grid"
model = "Load"
bus = "{bus}"
p_mw = 1.0
q_mvar = 0.0

[entities.feeder]
sim = "grid"
model = "Grid"
"""


def two_bus(folder: Path, max_i_ka: float) -> Path:
    net = pp.create_empty_network()
    b0 = pp.create_bus(net, vn_kv=VS_KV, name="b0")
    b1 = pp.create_bus(net, vn_kv=VS_KV, name="b1")
    pp.create_ext_grid(net, b0, vm_pu=1.0)
    pp.create_line_from_parameters(net, b0, b1, length_km=10.0, r_ohm_per_km=R_OHM / 10, x_ohm_per_km=X_OHM / 10,
                                   c_nf_per_km=0.0, max_i_ka=max_i_ka, name="l01")
    pp.to_json(net, str(folder / "two_bus.json"))
    path = folder / "hc.toml"
    path.write_text(SCENARIO.format(network="two_bus.json", bus="b1"))
    return path


def v_receiving_kv(p_mw: float) -> float:
    """Receiving-end voltage of the two-bus feeder at unity power factor. [kV]"""
    a = VS_KV**2 - 2 * p_mw * R_OHM
    return math.sqrt((a + math.sqrt(a * a - 4 * p_mw**2 * (R_OHM**2 + X_OHM**2))) / 2)


def test_two_bus_voltage_limit_matches_the_closed_form(tmp_path):
    scenario = two_bus(tmp_path, max_i_ka=10.0)
    v = 0.95 * VS_KV
    z2 = R_OHM**2 + X_OHM**2
    exact = (-2 * R_OHM * v**2 + math.sqrt(4 * R_OHM**2 * v**4 - 4 * z2 * (v**4 - VS_KV**2 * v**2))) / (2 * z2)
    assert exact == pytest.approx(9.018, abs=1e-3)
    table = hosting_capacity(scenario, "pcc", tmp_path / "out", buses=["b1"], max_mw=20.0, tol_mw=TOL_MW,
                             workers=0, progress=False, **STEP)
    row = table.iloc[0]
    assert row["limited_by"] == "voltage" and row["bound"] == "exact"
    assert row["holds_again_mw"] == "not scanned"  # pandapower holds every tap: nothing acts above
    assert exact - TOL_MW <= row["hosting_mw"] <= exact  # never above the limit, at most tol below
    assert row["vm_min_pu"] >= 0.95
    assert (tmp_path / "out" / "hosting.png").is_file() and (tmp_path / "out" / "hosting.parquet").is_file()


def test_two_bus_thermal_limit_matches_the_line_rating(tmp_path):
    max_i_ka = 0.2
    scenario = two_bus(tmp_path, max_i_ka=max_i_ka)
    exact = brentq(lambda p: p / (math.sqrt(3) * v_receiving_kv(p)) - max_i_ka, 0.1, 9.0)
    assert v_receiving_kv(exact) > 0.95 * VS_KV  # the rating binds before the voltage does
    table = hosting_capacity(scenario, "pcc", tmp_path / "out", buses=["b1"], max_mw=20.0, tol_mw=TOL_MW,
                             workers=0, progress=False, **STEP)
    row = table.iloc[0]
    assert row["limited_by"] == "thermal"
    assert exact - TOL_MW <= row["hosting_mw"] <= exact
    assert row["max_loading_pct"] <= 100.0


def pandapower_limit_mw(bus_name: str, v_low: float, tol_mw: float = 1e-4) -> float:
    """Largest P (q = 0) at a bus of ieee33 keeping every bus ≥ v_low, by plain runpp bisection."""
    from cosim import grid_models

    def ok(p_mw: float) -> bool:
        net = grid_models.load_network("ieee33")
        bus = net.bus.index[net.bus.name == bus_name][0]
        pp.create_load(net, bus, p_mw=p_mw, q_mvar=0.0)
        pp.runpp(net)
        return float(net.res_bus.vm_pu.min()) >= v_low

    lo, hi = 0.0, 20.0
    while hi - lo > tol_mw:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def test_ieee33_bus_matches_pandapower_bisection(tmp_path):
    """Baran & Wu's feeder sits at 0.913 pu at its peak load: with the default 0.95 pu limit
    the base case fails (0 MW, said so); with a 0.90 pu limit bus 3 takes a few MW."""
    scenario = tmp_path / "hc33.toml"
    scenario.write_text(SCENARIO.format(network="ieee33", bus="3"))
    base = hosting_capacity(scenario, "pcc", tmp_path / "base", buses=["18"], workers=0, progress=False)
    assert base.iloc[0]["hosting_mw"] == 0
    assert base.iloc[0]["limited_by"] == ("base case: voltage (without the load: the lowest checked voltage is 0.913 pu "
                                          "at bus 18, below 0.95 (pass --v-low 0.91 to study from the feeder's own level))")
    assert base.iloc[0]["vm_min_pu"] == pytest.approx(0.913, abs=1e-3)

    table = hosting_capacity(scenario, "pcc", tmp_path / "out", buses=["3"], max_mw=20.0, tol_mw=TOL_MW,
                             limits=Limits(v_low_pu=0.90), workers=0, progress=False, **STEP)
    exact = pandapower_limit_mw("3", 0.90)
    assert 1.0 < exact < 20.0
    assert exact - TOL_MW <= table.iloc[0]["hosting_mw"] <= exact + 1e-6


def test_ieee33_with_a_conductor_rating_is_limited_by_it(tmp_path):
    """Issue 31, case 1: with pandapower's 99,999 kA placeholders bus 3 is voltage-limited; given a
    300 A rating (``network_params.max_i_ka``) the feeder head overloads first, at the P where plain
    runpp puts the most loaded line at 100 %."""
    from cosim import grid_models

    def loading_ok(p_mw: float) -> bool:
        net = grid_models.load_network("ieee33", max_i_ka=0.3)
        pp.create_load(net, net.bus.index[net.bus.name == "3"][0], p_mw=p_mw, q_mvar=0.0)
        pp.runpp(net)
        return float(net.res_line.loading_percent.max()) <= 100.0

    lo, hi = 0.0, 20.0
    while hi - lo > 1e-4:
        lo, hi = ((lo + hi) / 2, hi) if loading_ok((lo + hi) / 2) else (lo, (lo + hi) / 2)
    scenario = tmp_path / "hc33.toml"
    scenario.write_text(SCENARIO.format(network="ieee33", bus="3").replace(
        'network = "ieee33"', 'network = "ieee33"\nnetwork_params = {max_i_ka = 0.3}'))
    row = hosting_capacity(scenario, "pcc", tmp_path / "out", buses=["3"], max_mw=20.0, tol_mw=TOL_MW,
                           limits=Limits(v_low_pu=0.90), workers=0, progress=False, **STEP).iloc[0]
    assert row["limited_by"] == "thermal"
    assert lo < pandapower_limit_mw("3", 0.90)  # the rating, not the voltage, binds first
    assert lo - TOL_MW <= row["hosting_mw"] <= lo + 1e-6


def test_ieee33_rating_must_be_a_current_in_ka():
    from cosim import grid_models

    for bad in (0, -0.4, 400, "0.4", True):
        with pytest.raises(ValueError, match="network_params.max_i_ka"):
            grid_models.load_network("ieee33", max_i_ka=bad)


def test_feeder_buses_and_setup(tmp_path):
    scenario = tmp_path / "hc33.toml"
    scenario.write_text(SCENARIO.format(network="ieee33", bus="3"))
    setup, scn = resolve_setup(scenario, "pcc")
    assert (setup.size_keys, setup.bus_key, setup.grid_entity) == (("entities.pcc.p_mw",), "entities.pcc.bus", "feeder")
    assert feeder_buses(scn, "feeder") == [str(n) for n in range(2, 34)]  # bus 1 is the slack
    import importlib.util

    spec = importlib.util.spec_from_file_location("sweep_tests", Path(__file__).with_name("test_sweep.py"))
    sweep_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep_tests)
    (tmp_path / "facility.toml").write_text(sweep_tests.FACILITY)
    setup, _ = resolve_setup(tmp_path / "facility.toml", "campus")  # sized by peak_mw, moved by what it feeds
    assert (setup.size_keys, setup.bus_key) == (("entities.campus.peak_mw",), "entities.pcc.bus")


def test_map_places_buses_by_name(tmp_path):
    """ieee33's bus "3" is pandapower index 2: the map must not take the index-3 bus for it."""
    scenario = tmp_path / "hc33.toml"
    scenario.write_text(SCENARIO.format(network="ieee33", bus="3"))
    _, scn = resolve_setup(scenario, "pcc")
    xy, names, lines = _coordinates(scn, "feeder")
    assert bus_positions(["3", "18"], xy, names) == {"3": xy[2], "18": xy[17]}
    assert (xy[0], xy[1]) in lines  # the line 1-2 joins the slack to bus "2"


def v_receiving_pf_kv(p_mw: float, power_factor: float) -> float:
    """Receiving-end voltage with a lagging load q = p·tan(acos pf). [kV]"""
    q = p_mw * math.tan(math.acos(power_factor))
    a = VS_KV**2 - 2 * (p_mw * R_OHM + q * X_OHM)
    return math.sqrt((a + math.sqrt(a * a - 4 * (p_mw**2 + q**2) * (R_OHM**2 + X_OHM**2))) / 2)


def test_replayed_site_draw_matches_the_closed_form(tmp_path):
    """A measured facility trace (pf 0.98) feeding pcc: sizing the trace's peak_mw and
    replaying pcc's recorded draw both find the peak draw where V = 0.95 Vs."""
    two_bus(tmp_path, max_i_ka=10.0)
    trace = (Path(__file__).resolve().parents[2] / "scenarios/data/loads/helios_earth_day_2020-05-20.csv").as_posix()
    scenario = tmp_path / "site.toml"
    scenario.write_text(SCENARIO.format(network="two_bus.json", bus="b1").replace("p_mw = 1.0\nq_mvar = 0.0\n", "")
                        + f'\n[sims.facility]\nadapter = "load"\n\n[entities.campus]\nsim = "facility"\n'
                        f'model = "FacilityLoad"\nfile = "{trace}"\nrepeat = true\npeak_mw = 1.0\npower_factor = 0.98\n'
                        '\n[[connect]]\nsrc = "campus"\ndst = "pcc"\nattrs = ["p_mw", "q_mvar"]\n')
    exact = brentq(lambda p: v_receiving_pf_kv(p, 0.98) - 0.95 * VS_KV, 0.1, 9.0)
    hour = {"scenario.duration_s": 3600}
    sized = hosting_capacity(scenario, "campus", tmp_path / "sized", buses=["b1"], max_mw=20.0, tol_mw=TOL_MW,
                             overrides=hour, workers=0, progress=False, **STEP).iloc[0]
    replayed = hosting_capacity(scenario, "pcc", tmp_path / "replay", buses=["b1"], max_mw=20.0, tol_mw=TOL_MW,
                                overrides=hour, workers=0, progress=False, **STEP).iloc[0]
    assert (tmp_path / "replay" / "replay.csv").is_file()
    assert replayed["limited_by"] == sized["limited_by"] == "voltage"
    assert exact - TOL_MW <= replayed["hosting_mw"] <= exact
    assert replayed["peak_drawn_mw"] == pytest.approx(replayed["hosting_mw"], rel=1e-6)
    assert exact - TOL_MW <= sized["peak_drawn_mw"] <= exact + 1e-6
    assert sized["hosting_mw"] >= sized["peak_drawn_mw"]  # peak_mw is the whole day's peak, this hour's is lower


def test_hosting_on_a_running_dask_scheduler(tmp_path):
    """The same study sent to an existing scheduler (as with dask-jobqueue) gives the same answer."""
    from distributed import LocalCluster

    scenario = two_bus(tmp_path, max_i_ka=10.0)
    local = hosting_capacity(scenario, "pcc", tmp_path / "local", buses=["b1"], max_mw=20.0, tol_mw=0.5,
                             workers=0, progress=False, **STEP)
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster:
        remote = hosting_capacity(scenario, "pcc", tmp_path / "remote", buses=["b1", "nowhere"], max_mw=20.0,
                                  tol_mw=0.5, scheduler=cluster.scheduler_address, progress=False, **STEP)
    assert remote.iloc[0]["hosting_mw"] == local.iloc[0]["hosting_mw"] and remote.iloc[0]["n_runs"] > 2
    assert remote.iloc[1]["bound"] == "error" and "unknown bus 'nowhere'" in remote.iloc[1]["limited_by"]


# -- review findings: a run that failed for a non-grid reason is not a grid violation ----------
def _failing_above(monkeypatch, size_mw: float, exc: type[BaseException] | None = None, bus: str | None = None):
    """Runs larger than ``size_mw`` (at ``bus``, or any) crash: metadata says failed (or ``exc`` is raised)."""
    import cosim.studies.hosting as hosting_module
    from cosim.folder import RunFolder

    real = hosting_module.run_variant

    def run_variant(scenario, overrides, run_dir, report=False, allow_commands=False):
        if overrides["entities.pcc.p_mw"] > size_mw and bus in (None, overrides["entities.pcc.bus"]):
            if exc is not None:
                raise exc()
            Path(run_dir).mkdir(parents=True, exist_ok=True)
            RunFolder(run_dir).write_failed("MemoryError: worker out of memory (at cluster.py:1)")
            return RunFolder(run_dir).sweep_row()
        return real(scenario, overrides, run_dir, report, allow_commands)

    monkeypatch.setattr(hosting_module, "run_variant", run_variant)


def test_a_crashed_run_is_an_error_not_a_violation(tmp_path, monkeypatch):
    scenario = two_bus(tmp_path, max_i_ka=10.0)
    _failing_above(monkeypatch, 5.0)  # below the 9.02 MW voltage limit: bisection would report ~5 MW
    row = hosting_capacity(scenario, "pcc", tmp_path / "out", buses=["b1"], max_mw=20.0, tol_mw=0.5,
                           workers=0, progress=False, **STEP).iloc[0]
    assert row["bound"] == "error" and math.isnan(row["hosting_mw"])
    assert "MemoryError: worker out of memory" in row["limited_by"] and "passed up to" in row["limited_by"]


def test_an_interrupted_study_keeps_the_finished_buses(tmp_path, monkeypatch):
    import pandas as pd

    scenario = two_bus(tmp_path, max_i_ka=10.0)
    scenario.write_text(scenario.read_text().replace('bus = "b1"', 'bus = "b0"'))
    _failing_above(monkeypatch, 1.0, exc=KeyboardInterrupt, bus="b1")  # the second bus: Ctrl-C
    with pytest.raises(KeyboardInterrupt):
        hosting_capacity(scenario, "pcc", tmp_path / "out", buses=["b0", "b1"], max_mw=20.0, tol_mw=0.5,
                         workers=0, progress=False, **STEP)
    table = pd.read_csv(tmp_path / "out" / "hosting.csv")
    assert table["bound"].tolist() == ["lower bound", "not run"]  # b0 (the source's bus) hosts anything
    assert pd.read_parquet(tmp_path / "out" / "hosting.parquet")["bus"].tolist() == ["b0", "b1"]


# -- the grid's verdict is a typed failure, not a wording ------------------------------------
@pytest.mark.parametrize("engine", ["direct", "mosaik"])
def test_a_diverging_power_flow_is_a_typed_failure_on_every_engine(tmp_path, engine):
    """60 MW through 2 + j3 Ω from 20 kV is beyond the line's largest transfer (~35 MW at unity
    power factor: Vs² / (2 (|Z| + R))): with ``on_nonconvergence = "fail"`` the run fails, and
    its metadata says why by type."""
    from cosim.folder import RunFolder
    from cosim.studies.hosting import verdict
    from cosim.studies.sweep import run_variant

    scenario = two_bus(tmp_path, max_i_ka=10.0)
    row = run_variant(str(scenario), {"sims.grid.on_nonconvergence": "fail", "entities.pcc.p_mw": 60.0,
                                      "scenario.engine": engine}, str(tmp_path / "run"))
    meta = RunFolder(tmp_path / "run").metadata()
    assert row["status"] == "failed" and meta["error_type"] == "PowerFlowNotConverged"
    assert verdict(tmp_path / "run", "feeder", Limits()) == (False, "nonconvergence", {})


def test_hosting_reads_nonconvergence_from_the_type_and_not_the_text(tmp_path, monkeypatch):
    """The only limit in reach is the power flow's (no voltage floor to speak of): the answer is
    below the ~35 MW transfer limit and limited by nonconvergence; a run that failed with the same
    words but no type is an error of that bus, not a grid verdict."""
    import cosim.studies.hosting as hosting_module
    from cosim.folder import RunFolder

    scenario = two_bus(tmp_path, max_i_ka=10.0)
    scenario.write_text(scenario.read_text().replace('network = "two_bus.json"',
                                                     'network = "two_bus.json"\non_nonconvergence = "fail"'))
    loose = Limits(v_low_pu=0.01, v_high_pu=2.0)
    row = hosting_capacity(scenario, "pcc", tmp_path / "typed", buses=["b1"], max_mw=60.0, tol_mw=0.5, limits=loose,
                           step_mw=10.0, scan_above=False, workers=0, progress=False).iloc[0]
    assert row["limited_by"] == "nonconvergence" and row["bound"] == "exact" and 25.0 < row["hosting_mw"] < 40.0

    def run_variant(scenario, overrides, run_dir, report=False, allow_commands=False):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        RunFolder(run_dir).write_failed("RuntimeError: grid sim grid: power flow did not converge at 00:00")
        return RunFolder(run_dir).sweep_row()

    monkeypatch.setattr(hosting_module, "run_variant", run_variant)
    row = hosting_capacity(scenario, "pcc", tmp_path / "text", buses=["b1"], max_mw=60.0, tol_mw=0.5, limits=loose,
                           step_mw=10.0, workers=0, progress=False).iloc[0]
    assert row["bound"] == "error" and "power flow did not converge" in row["limited_by"]
