"""A simulator that ends the run on purpose (:class:`cosim.sdk.EndRun`, e.g. an FMU asking to
terminate) ends it ``ok`` with its reason and the rows up to then, wherever it runs: in-process on
either engine, in its own process (mosaik only sees an error message from the other side), and
in a :class:`cosim.Session` stepped from Python (``done``, ``ended``)."""

from __future__ import annotations

import os

import pytest

import cosim
from cosim.run.session import Session

HELPERS = os.path.join(os.path.dirname(__file__), os.pardir, "helpers")

TOY = """
[scenario]
name = "ending"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60
engine = "{engine}"

[sims]
src = {{ adapter = "toy_ending", end_at_s = 600{process} }}
sink = {{ adapter = "toy_sink" }}

[entities]
a = {{ sim = "src", model = "Ending" }}
s = {{ sim = "sink", model = "Sink" }}

[[connect]]
src = "a"
dst = "s"
attrs = ["p_mw"]
"""

REASON = "toy src reached its end at t = 600 s"


@pytest.mark.parametrize("engine,process", [("mosaik", ""), ("direct", ""), ("mosaik", ', process = "subprocess"')])
def test_an_ending_simulator_ends_the_run_ok_with_its_reason(tmp_path, write_scenario, toy_adapters, monkeypatch,
                                                             engine, process):
    monkeypatch.setenv("PYTHONPATH", os.path.abspath(HELPERS))  # the simulator process imports toy_sims
    result = cosim.run(write_scenario(TOY.format(engine=engine, process=process)), out_dir=tmp_path)
    assert result.status == "ok" and result.reason == REASON
    ts = result.timeseries()
    assert len(ts) == 10 and ts.index[-1].minute == 9  # t = 0 .. 540 s; the step at 600 s never happened
    assert result.kpis["duration_h"] == pytest.approx(10 / 60)


def test_a_session_stops_where_a_simulator_ended_it(tmp_path, write_scenario, toy_adapters):
    with Session(write_scenario(TOY.format(engine="direct", process="")), out_dir=tmp_path, report=False) as s:
        s.run_until(3600)
        assert s.done and s.ended == REASON and s.time_s == 600
        assert s.step() == 600  # stepping an ended session does nothing
    assert s.result.status == "ok" and s.result.reason == REASON and len(s.result.timeseries()) == 10


def test_a_remote_failure_keeps_one_line_and_logs_the_traceback(tmp_path, write_scenario, toy_adapters, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.path.abspath(HELPERS))
    text = TOY.format(engine="mosaik", process=', process = "subprocess"').replace("toy_ending", "toy_faulty")
    text = text.replace("end_at_s", "fail_at_s").replace('"Ending"', '"Faulty"')
    result = cosim.run(write_scenario(text), out_dir=tmp_path)
    assert result.status == "failed" and "RuntimeError(injected failure at t = 600 s)" in result.reason
    assert "Traceback" not in result.reason and "simulators.log" in result.reason
    assert "Traceback" in (result.run_dir / "simulators.log").read_text()
