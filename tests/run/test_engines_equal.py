"""Both engines give identical results on every catalogue scenario and the golden scenarios.

Every ``scenarios/*.toml`` (and every published case in ``scenarios/published/`` that is a
scenario itself) runs on mosaik and on the direct engine, cut to a window that still
passes through what the scenario is about (its DR event, its peak hours, the regulators' first
tap changes; :data:`WINDOWS`, a new scenario gets :data:`DEFAULT_WINDOW_S`), and the time series
must be equal **exactly**, column by column (same floats to the last bit: the direct engine
delivers several sources into one input in mosaik's order, so ``sum_inputs`` adds them in the
same order), and kpis.json equal. Every numeric KPI key also carries its unit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import cosim
from cosim.run.ahead import head_sims
from cosim.run.direct import DirectEngine
from cosim.scenario import load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from kpi_units import unitless_kpis  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: the catalogue, and the published cases that are scenarios themselves (not sidecars of one)
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml")) + [
    p for p in sorted((ROOT / "scenarios" / "published").glob("*.toml")) if "[scenario]" in p.read_text()]
GOLDEN = [ROOT / "tests" / "scenarios" / "golden_short.toml", ROOT / "tests" / "scenarios" / "datacenter_short.toml"]
#: seconds of each scenario run here (from its own start), and why that window
WINDOWS = {
    "ai_campus_week": 21_600,        # 6 h of the ~50 MW campus on SimBench HV (its load and PV profiles)
    "battery_peak_shaving": 86_400,  # the day whose 15-min peak the dispatcher shaves
    "campus_pv_battery": 172_800,    # two days: PV self-consumption and the DR event of 16 July 19-22 UTC
    "carbon_aware": 86_400,          # one day of capacity curves against the carbon forecast
    "cooling_summer_week": 86_400,   # one day of both halls (air and liquid) through a July afternoon
    "default": 86_400,               # the showcase day
    "dr_event": 25_200,              # whole: the 19-22 UTC event with the hours around it
    "fleet_dr": 14_400,              # whole: the 0.5 MW request of 16 July 19-22 UTC
    "ieee13_llm_campus": 1_200,      # 20 min at 1 s: the regulators' delayed tap changes happen early
    "ieee13_voltage_aware": 1_200,   # the controller settles within minutes
    "ieee13_ofo": 600,               # OFO settles within seconds; its first tap-free 10 min
    "ieee13_ofo_pause": 120,         # OFO pauses the flexible jobs within its first minute
    "ieee123_multisite": 120,        # the rule saturates by ~22 s and the shifts run from 22 to 59 s
    "ieee34_multisite": 120,         # the rule saturates by ~18 s and the shifts run from 18 to 52 s
    "ieee123_multisite_ofo": 60,     # OFO over three sites; its signal starts the shifts at 4 s, they end by 38 s
    "ieee34_multisite_ofo": 60,      # OFO over both sites: its sensitivity solve and first minute of steps
    "multisite_carbon": 3_600,       # the first hour: replicas and training jobs move ERCOT -> CAISO from 0 s
    "load_loss_event": 120,          # whole (0.1 s steps): the third fault's transfer at 34 s and the response
    "interconnection_study": 36,     # ANDES at 0.1 s: the three faults, the third one's transfer at 34.1 s
    "npcc_perc1_campus": 4,          # ANDES (140 buses, 1/60 s): the fault at 2 s, the native PERC1's cease, the recovery
    "npcc_perc1_campuses": 3,        # ANDES, four native PERC1 campuses: the fault at 1 s, three cease, reconnection starts
    "npcc_perc1_campuses_staggered": 3,  # the same with staggered reconnection: the first site's return at 1.6 s
    "openg2g_ieee13": 30,            # the OFO's sensitivity solve and 30 of its 1 s steps (300 at 0.1 s)
    "oversubscription": 86_400,      # the day: POLCA caps at the inference peaks
    "precooling": 43_200,            # whole: pre-cooling before and through the 17-21 UTC peak
    "thermal_capping": 43_200,       # whole: the afternoon with one chiller left
    "voltage_aware": 28_800,         # whole: the midday violation window at bus 22
    # scenarios/published/
    "duke_headroom": 604_800,        # a week of the eight authorities' hourly series
    "emerald_london": 5_400,         # the first, 30 % event at 5-second steps, and the hour before
    "emerald_phoenix": 21_600,       # whole: the 3-hour event with the hours around it
    "mlenergy_curves": 1_200,        # whole: 20 minutes of 42 saturated replicas
    "mlenergy_configs": 300,         # 5 of its 20 minutes (75 saturated replicas)
    "ieee39_resonance": 20,          # ANDES at 0.1 s: 12 iterations of the forced swing (the case runs 120 s)
}
DEFAULT_WINDOW_S = 21_600


def _window(path: Path) -> dict[str, int]:
    scn = cosim.load_scenario(path)
    window = WINDOWS.get(path.stem, DEFAULT_WINDOW_S)
    step = scn.ticks(scn.scenario.step_s)  # in ticks: exact also for sub-second steps
    whole = scn.until_ticks if window >= scn.scenario.duration_s else max(step, scn.ticks(window) // step * step)
    duration = -(-whole // scn.ticks_per_s)  # duration_s is whole seconds
    duration = min(scn.scenario.duration_s, duration)
    return {"scenario.duration_s": duration}


#: (engine, [scenario] ahead): mosaik, and the direct engine with every simulator in this process
#: and with the simulators that take no inputs from the rest stepped ahead in a worker process
#: (cosim.run.ahead; "on" forks whatever the run's length or the machine's cores)
VARIANTS = (("mosaik", "auto"), ("direct", "off"), ("direct", "on"))


def _all(path: Path, tmp_path: Path, overrides: dict) -> tuple:
    runs = []
    for engine, ahead in VARIANTS:
        result = cosim.run(path, out_dir=tmp_path / f"{engine}-{ahead}",
                           overrides={**overrides, "scenario.engine": engine, "scenario.ahead": ahead})
        assert result.ok, f"{engine} (ahead {ahead}): {result.reason}"
        assert result.metadata["engine"] == engine
        if ahead == "on":  # the worker ran, unless no simulator is free of inputs from the rest
            assert (result.metadata["ahead"] is not None) == bool(_head(path, overrides))
        else:
            assert result.metadata["ahead"] is None
        runs.append(result)
    return tuple(runs)


def _head(path: Path, overrides: dict) -> list[str]:
    """The simulators a worker process would step ahead (none where every simulator is in a
    control loop with the grid, as in the OFO and voltage-aware scenarios)."""
    engine = DirectEngine(load_scenario(path, {**overrides, "scenario.engine": "direct"}), None)
    engine.start()
    try:
        return [s.sid for s in head_sims(engine)]
    finally:
        engine.finalize()


def _assert_identical(by_mosaik, *by_direct) -> None:
    a = by_mosaik.timeseries()
    for run in by_direct:
        b = run.timeseries()
        assert list(a.columns) == list(b.columns)
        assert a.index.equals(b.index)
        different = [c for c in a.columns if not a[c].equals(b[c])]
        assert not different, f"columns that differ between engines ({run.run_dir.parent.name}): {different[:10]}"
        assert by_mosaik.kpis == run.kpis


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_catalogue_scenario_is_identical_on_both_engines(path, tmp_path):
    by_mosaik, *by_direct = _all(path, tmp_path, _window(path))
    _assert_identical(by_mosaik, *by_direct)
    assert not unitless_kpis(by_direct[0].kpis), "KPI keys without a unit suffix"


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden_scenarios_are_identical_on_both_engines(path, tmp_path):
    _assert_identical(*_all(path, tmp_path, {}))


def test_the_window_table_names_only_catalogue_scenarios():
    """A scenario renamed or removed must not leave its window behind (the table would lie)."""
    assert set(WINDOWS) <= {p.stem for p in SCENARIOS}
