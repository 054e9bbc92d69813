"""Values that used to pass validation and then fail at run time (or run silently wrong) are one
validation problem naming the key, or a warning: reserved sim ids, non-finite or absurd numbers in
``[scenario]`` and ``[record]``, a negative trace feeding a load's draw, a repeated trace that is
not a whole number of its period. (Adapter params: tests/adapters/test_params_contract.py.)"""

from __future__ import annotations

import math
import typing

import numpy as np
import pandas as pd
import pytest

from cosim.errors import ScenarioError
from cosim.run import direct, mosaik_engine
from cosim.scenario import load_scenario
from cosim.scenario.schema import RESERVED_SIM_PREFIX, RecordSpec, ScenarioSection
from cosim.scenario.validate import LOAD_ROLES
from toy_scenarios import ramp_sink


def _problems(path, overrides=None) -> list:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, overrides or {})
    return info.value.problems


@pytest.mark.parametrize("sid", sorted({mosaik_engine.RECORDER_SID, direct.RECORDER_SID, "_mine"}))
def test_a_sim_id_the_engines_reserve_is_one_problem(sid, toy_adapters, write_scenario):
    assert sid.startswith(RESERVED_SIM_PREFIX)  # every engine's own sim id is covered by the rule
    text = ramp_sink().replace("sink = {", f"{sid} = {{").replace('sim = "sink"', f'sim = "{sid}"')
    problems = _problems(write_scenario(text))
    assert len(problems) == 1 and problems[0].path == f"sims.{sid}" and "cosim's own" in problems[0].message


def _numeric_fields(model, prefix):
    return [f"{prefix}.{name}" for name, field in model.model_fields.items()
            if {int, float} & set(typing.get_args(field.annotation) or (field.annotation,))]


NUMERIC = _numeric_fields(ScenarioSection, "scenario") + _numeric_fields(RecordSpec, "record")


def test_the_numeric_fields_are_found():
    assert {"scenario.step_s", "scenario.duration_s", "scenario.stall_timeout_s", "record.flush_s"} <= set(NUMERIC)


@pytest.mark.parametrize("key", NUMERIC)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -1.0, 0.0, 1e300], ids=str)
def test_every_numeric_scenario_field_refuses_absurd_values_cleanly(key, value, toy_adapters, write_scenario):
    """inf, NaN, negative, zero and 1e300 on every number of [scenario] and [record]: accepted or
    one problem naming the key, never another exception (``--set scenario.step_s=inf`` was an
    internal error); the non-finite ones and 1e300 are always refused."""
    path = write_scenario(ramp_sink())
    try:
        load_scenario(path, {key: value})
    except ScenarioError as exc:
        assert [p.path for p in exc.problems] == [key], exc.problems
        assert "float" not in exc.problems[0].path.split(".")  # a union's branch is no key
    else:
        assert math.isfinite(value) and value != 1e300, f"{key} = {value} was accepted"


def _trace(path, values, step_min=60):
    times = pd.date_range("2024-07-15", periods=len(values), freq=f"{step_min}min", tz="UTC")
    pd.DataFrame({"time_utc": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "p_mw": values}).to_csv(path, index=False)


FED = """
[scenario]
name = "fed"
start = 2024-07-15T00:00:00Z
duration_s = 86400
step_s = 3600

[sims]
trace = {{ adapter = "signals", file = "trace.csv", columns = {{ p_mw = "p_mw" }}{extra} }}
sink = {{ adapter = "toy_follow" }}

[entities]
t = {{ sim = "trace", model = "Series" }}
s = {{ sim = "sink", model = "Follow", role = "{role}" }}

[[connect]]
src = "t"
dst = "s"
attrs = ["p_mw"]
"""


@pytest.mark.parametrize("role", LOAD_ROLES)
def test_a_negative_trace_feeding_a_load_is_one_problem(role, tmp_path, toy_adapters, write_scenario):
    _trace(tmp_path / "trace.csv", [1.0] * 10 + [-0.5] + [1.0] * 13)
    problems = _problems(write_scenario(FED.format(role=role, extra="")))
    assert len(problems) == 1 and problems[0].path == "connect[0]"
    assert "goes negative (-0.5 MW at row 11" in problems[0].message and "trace.csv" in problems[0].message


@pytest.mark.parametrize("role", ["other", "clean_gen"])
def test_a_negative_trace_elsewhere_is_not_a_load_problem(role, tmp_path, toy_adapters, write_scenario):
    _trace(tmp_path / "trace.csv", [1.0] * 10 + [-0.5] + [1.0] * 13)
    load_scenario(write_scenario(FED.format(role=role, extra="")))


def test_a_positive_trace_feeding_a_load_passes(tmp_path, toy_adapters, write_scenario):
    _trace(tmp_path / "trace.csv", [1.0] * 24)
    load_scenario(write_scenario(FED.format(role="load", extra="")))


def _daily(hours: int, step_min: int = 15) -> list[float]:
    t_h = np.arange(hours * 60 // step_min) * step_min / 60
    return list(1.5 + np.sin(2 * np.pi * t_h / 24))  # a daily shape, in MW


@pytest.mark.parametrize("hours,warned", [(8, True), (6, True), (24, False), (48, False)])
def test_a_repeated_trace_that_is_not_whole_periods_is_a_warning(hours, warned, tmp_path, toy_adapters,
                                                                 write_scenario):
    """A day's trace cut to a third (8 h, an even part of a day) joined end to start jumps by more
    than any step inside it: a warning; whole days loop smoothly: none."""
    _trace(tmp_path / "trace.csv", _daily(hours), step_min=15)
    scn = load_scenario(write_scenario(FED.format(role="load", extra=", repeat = true")))
    texts = [w for w in scn.warnings if "end does not join its start" in w]
    assert bool(texts) == warned, scn.warnings


def test_a_short_flat_loop_is_not_warned(tmp_path, toy_adapters, write_scenario):
    """A trace without a daily shape whose end joins its start (a 1-hour pattern looped on purpose)."""
    _trace(tmp_path / "trace.csv", [1.0, 1.2, 1.4, 1.2], step_min=15)
    scn = load_scenario(write_scenario(FED.format(role="load", extra=", repeat = true")))
    assert not [w for w in scn.warnings if "repeat" in w], scn.warnings
