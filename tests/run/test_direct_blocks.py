"""The direct engine's look-ahead blocks (cosim.run.direct._Blocks): a simulator that takes the
look-ahead hint (PV) and its sources (the weather) are stepped a block ahead of the rest, in
this process; the results must be those of stepping them with the rest, to the bit.

Identity with mosaik is checked on every catalogue scenario (test_engines_equal.py, whose direct
runs use the blocks); here: against the same engine without blocks, with short blocks so that
runs cross many block ends, and what happens to an error and a warning in a block.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest

import cosim
from cosim.run import direct
from cosim.run.direct import DirectEngine
from cosim.scenario import load_scenario
from toy_scenarios import ramp_sink
from toy_sims import HintSim

ROOT = direct.__file__.rsplit("/cosim/", 1)[0]
HINT = """
[sims.h]
adapter = "toy_hint"
{params}

[entities.hh]
sim = "h"
model = "Hint"

[[connect]]
src = "a"
dst = "hh"
attrs = ["p_mw"]
"""


def _run(path, out, blocks: bool, monkeypatch, **overrides):
    with monkeypatch.context() as patch:
        if not blocks:
            patch.setattr(direct, "block_sims", lambda engine, copied=False: [])
        return cosim.run(path, out_dir=out, overrides={"scenario.engine": "direct", "scenario.ahead": "off",
                                                       **overrides})


def _same(a, b) -> pd.DataFrame:
    assert (a.status, a.reason) == (b.status, b.reason)
    pd.testing.assert_frame_equal(a.timeseries(), b.timeseries(), check_exact=True)
    assert a.kpis == b.kpis
    return b.timeseries()


def _block_sids(path, **overrides) -> list[str]:
    engine = DirectEngine(load_scenario(path, {"scenario.engine": "direct", **overrides}), None)
    engine.start()
    try:
        return [s.sid for s in direct.block_sims(engine)]
    finally:
        engine.finalize()


def test_the_blocks_of_the_default_scenario_are_the_weather_and_pv():
    """PV takes the hint; the weather is its only source. Carbon, the datacenter and the rest
    (FMUs fed by the weather too) are stepped as usual."""
    assert _block_sids(f"{ROOT}/scenarios/default.toml") == ["weather", "solar"]


def test_a_simulator_with_the_hint_fed_back_from_the_rest_gets_no_block(toy_adapters, write_scenario):
    """Its sources join it (a time-shifted one too: it steps earlier); a loop back into its
    source takes both out of the scenario's head: no block."""
    plain = HINT.format(params="")
    shifted = plain + '\n[[connect]]\nsrc = "s"\ndst = "hh"\nattrs = [["p_sum_mw", "p_mw"]]\n' \
        'time_shifted = true\ninitial_data = { p_sum_mw = 0.0 }\n'
    loop = plain + '\n[[connect]]\nsrc = "hh"\ndst = "a"\nattrs = [["p2_mw", "p_cap_mw"]]\n' \
        'time_shifted = true\ninitial_data = { p2_mw = 100.0 }\n'
    assert _block_sids(write_scenario(ramp_sink(extra=plain))) == ["src", "h"]
    assert _block_sids(write_scenario(ramp_sink(extra=shifted), "shifted.toml")) == ["src", "sink", "h"]
    assert _block_sids(write_scenario(ramp_sink(extra=loop), "loop.toml")) == []


@pytest.mark.parametrize("hint_step_s", [60, 180])
def test_blocks_give_the_results_of_stepping_with_the_rest(toy_adapters, write_scenario, tmp_path, monkeypatch,
                                                           hint_step_s):
    """Blocks of 7 steps over an hour (and a hinted simulator at thrice the step): every step of
    the hinted simulator is served from its hint, and the record equals the run without blocks."""
    monkeypatch.setattr(direct, "BLOCK_STEPS", 7)
    path = write_scenario(ramp_sink(extra=HINT.format(params=f"step_s = {hint_step_s}")))
    HintSim.hints.clear()
    HintSim.served.clear()
    plain = _run(path, tmp_path / "plain", False, monkeypatch)
    assert HintSim.hints == [] and HintSim.served == []
    blocks = _run(path, tmp_path / "blocks", True, monkeypatch)
    ts = _same(plain, blocks)
    n_steps = 3600 // hint_step_s
    assert sum(HintSim.hints) == n_steps and len(HintSim.hints) == -(-60 // 7)
    assert HintSim.served == list(range(0, 3600, hint_step_s))
    assert len(ts) == 60 and ts["hh.p2_mw"].notna().all()


def test_an_error_in_a_block_ends_the_run_at_its_step(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """The hinted simulator raises at 1,200 s, inside a block already stepped past the engine's
    time: the run fails at that step with what was recorded before it, as without blocks."""
    monkeypatch.setattr(direct, "BLOCK_STEPS", 15)
    path = write_scenario(ramp_sink(extra=HINT.format(params="fail_at_s = 1200")))
    ts = _same(_run(path, tmp_path / "plain", False, monkeypatch), failed := _run(path, tmp_path / "b", True,
                                                                                     monkeypatch))
    assert failed.status == "failed" and "toy hint fails at t = 1200 s" in failed.reason
    assert len(ts) == 20  # 0 .. 1140 s


def test_a_warning_in_a_block_is_given_once(toy_adapters, write_scenario, tmp_path, monkeypatch):
    path = write_scenario(ramp_sink(extra=HINT.format(params="warn_at_s = 300")))
    with pytest.warns(UserWarning, match="toy hint warns at t = 300 s") as caught:
        result = _run(path, tmp_path / "b", True, monkeypatch)
    assert result.ok and sum("toy hint warns" in str(w.message) for w in caught) == 1


def test_the_showcase_in_short_blocks_gives_the_results_without_blocks(tmp_path, monkeypatch):
    """Three lit hours of the default scenario (1-minute steps, TMY3 weather interpolated
    linearly: it changes every step) in blocks of 17 steps: the record and the KPIs equal
    the run without blocks, to the bit."""
    monkeypatch.setattr(direct, "BLOCK_STEPS", 17)
    path = f"{ROOT}/scenarios/default.toml"
    window = {"scenario.start": datetime(2024, 7, 15, 13, tzinfo=timezone.utc), "scenario.duration_s": 3 * 3600}
    ts = _same(_run(path, tmp_path / "plain", False, monkeypatch, **window),
               _run(path, tmp_path / "blocks", True, monkeypatch, **window))
    assert len(ts) == 180 and (ts["pv.p_mw"] > 0.1).all()


def test_a_run_paced_in_real_time_gets_no_block(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """A source read from the wall clock must be stepped on it: no stepping ahead."""
    path = write_scenario(ramp_sink(extra=HINT.format(params="")))
    HintSim.hints.clear()
    result = _run(path, tmp_path / "rt", True, monkeypatch, **{"scenario.rt_factor": 1e-4})
    assert result.ok and HintSim.hints == []


def test_the_showcase_year_in_blocks_equals_mosaik_on_its_first_day(tmp_path, monkeypatch):
    """The showcase year's scenario (``bench/bench_engines.py --cases year``) cut to its first
    day: the direct engine in one process with blocks of 97 steps (blocks end at every hour of
    the day somewhere) gives mosaik's record and KPIs."""
    monkeypatch.setattr(direct, "BLOCK_STEPS", 97)
    path = f"{ROOT}/scenarios/default.toml"
    window = {"scenario.start": datetime(2024, 1, 1, tzinfo=timezone.utc), "scenario.duration_s": 86_400}
    on_mosaik = cosim.run(path, out_dir=tmp_path / "mosaik", overrides={**window, "scenario.engine": "mosaik"})
    ts = _same(on_mosaik, _run(path, tmp_path / "blocks", True, monkeypatch, **window))
    assert len(ts) == 1440 and (ts["pv.p_mw"] > 0).sum() > 300  # lit (an overcast day: over 0.5 MW for 10 min)


# -- in a Session: hints only, from copies of the sources ------------------------------------------
def _session_series(path, out, blocks: bool, monkeypatch, actions=(), **overrides):
    """The time series of a Session stepped to its end, with ``actions`` ``(time_s, entity,
    attr, value)`` set on the way, and the values ``get`` read after every step."""
    read = []
    with monkeypatch.context() as patch:
        if not blocks:
            patch.setattr(direct, "block_sims", lambda engine, copied=False: [])
        with cosim.Session(path, overrides={"scenario.ahead": "off", **overrides}, out_dir=out,
                           report=False) as session:
            assert (session.engine.blocks is not None) == blocks
            todo = list(actions)
            while not session.done:
                while todo and todo[0][0] <= session.time_s:
                    session.set(*todo.pop(0)[1:])
                session.step()
                read.append((session.get("pv.p_mw"), session.get("tmy.ghi_w_m2"), session.get("pv.t_cell_c")))
    return session.result.timeseries(), read


def served_from_hints(path, window) -> int:
    """Steps of PV in a Session over ``window`` whose outputs came from the hint (not evaluated alone)."""
    from cosim.adapters import pv

    served = 0
    lit = pv.PvSim._lit

    def counting(self, geo, weather):
        nonlocal served
        ahead = geo.ahead.get(self.time_ticks // self.step_ticks)
        served += ahead is not None and ahead[0] == weather
        return lit(self, geo, weather)

    pv.PvSim._lit = counting
    try:
        with cosim.Session(path, overrides={"scenario.ahead": "off", **window}, record=False) as session:
            session.run_until(window["scenario.duration_s"])
    finally:
        pv.PvSim._lit = lit
    return served


def test_a_session_with_hints_gives_the_results_without_them(tmp_path, monkeypatch):
    """Three lit hours of the showcase in a Session, in blocks of 17 steps, PV's weather input held
    from outside for half an hour and released: the record and every value ``get`` read after each
    step equal the Session without blocks, to the bit (the held steps are not the announced ones:
    PV computes them as usual), and the run's own weather and PV stepped at every step."""
    monkeypatch.setattr(direct, "BLOCK_STEPS", 17)
    path = f"{ROOT}/scenarios/default.toml"
    window = {"scenario.start": datetime(2024, 7, 15, 13, tzinfo=timezone.utc), "scenario.duration_s": 3 * 3600}
    actions = [(1800, "pv", "ghi_w_m2", 500.0), (3600, "pv", "ghi_w_m2", None)]
    plain, plain_read = _session_series(path, tmp_path / "plain", False, monkeypatch, actions, **window)
    hinted, hinted_read = _session_series(path, tmp_path / "hinted", True, monkeypatch, actions, **window)
    pd.testing.assert_frame_equal(plain, hinted, check_exact=True)
    assert hinted_read == plain_read and len(hinted) == 180 and (hinted["pv.p_mw"] > 0.1).all()
    assert served_from_hints(path, window) > 150
    assert not hinted["pv.poa_w_m2"].iloc[30:60].equals(plain["pv.poa_w_m2"].iloc[0:30])  # the hold took effect


def test_a_session_hint_taker_reads_copies_of_its_sources(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """The toy hint simulator in a Session: its sources are copied (the run's own source object
    is not stepped ahead), every step is served from a hint, and the record equals the Session
    without blocks."""
    monkeypatch.setattr(direct, "BLOCK_STEPS", 7)
    path = write_scenario(ramp_sink(extra=HINT.format(params="")))
    HintSim.served.clear()
    with cosim.Session(path, overrides={"scenario.ahead": "off"}, out_dir=tmp_path / "s", report=False) as session:
        blocks = session.engine.blocks
        assert [t.sid for t in blocks.twins] == ["src"] and [s.sid for s, _ in blocks.hinted] == ["h"]
        assert blocks.twins[0].obj is not session.engine.by_sid["src"].obj
        session.run_until(1800)
        assert session.engine.by_sid["src"].last_t == 1740  # the run's own source: at the run's time
    hinted = session.result.timeseries()
    assert HintSim.served == list(range(0, 1800, 60))
    with monkeypatch.context() as patch:
        patch.setattr(direct, "block_sims", lambda engine, copied=False: [])
        with cosim.Session(path, overrides={"scenario.ahead": "off"}, out_dir=tmp_path / "p", report=False) as plain:
            plain.run_until(1800)
    pd.testing.assert_frame_equal(plain.result.timeseries(), hinted, check_exact=True)


def test_a_fill_changes_the_warnings_filters_only_holding_the_fill_lock(tmp_path, monkeypatch):
    """The process has one warnings filter list: a fill that silences its stand-ins changes it only while holding
    ``_QUIET_FILL``, so fills of two Sessions in two threads take turns (unordered, one could restore the other's
    "ignore" for good), and no "ignore" is left once the run ends. Control: the lock is taken at all."""
    import sys
    import threading
    import warnings

    class Recording:
        def __init__(self):
            self.lock, self.depth, self.entries = threading.RLock(), 0, 0

        def __enter__(self):
            self.lock.acquire()
            self.depth += 1
            self.entries += 1

        def __exit__(self, *exc):
            self.depth -= 1
            self.lock.release()

    lock, unlocked = Recording(), []
    simplefilter = warnings.simplefilter

    def checked(*args, **kwargs):
        if sys._getframe(1).f_code.co_filename == direct.__file__ and lock.depth == 0:  # (the engine's own)
            unlocked.append(args)
        return simplefilter(*args, **kwargs)

    monkeypatch.setattr(direct, "_QUIET_FILL", lock)
    monkeypatch.setattr(direct, "BLOCK_STEPS", 30)
    monkeypatch.setattr(warnings, "simplefilter", checked)
    before = list(warnings.filters)
    with cosim.Session(ROOT + "/scenarios/default.toml", overrides={"scenario.ahead": "off",
                                                                    "scenario.duration_s": 6 * 3600},
                       record=False) as session:  # (a Session's blocks step copies, their warnings unheard)
        session.run_until(6 * 3600)
    assert lock.entries > 0 and not unlocked
    catch_all = ("ignore", None, Warning, None, 0)  # what simplefilter("ignore") puts first
    assert warnings.filters.count(catch_all) == before.count(catch_all)
