"""Sub-second time at the adapter boundary, for every registered adapter.

mosaik counts time in ticks of ``time_resolution`` seconds (the scenario's ``tick_s``);
:class:`cosim.sdk.CosimSim` converts ticks to seconds, so an adapter stepped at 1 s with a
0.1 s tick (steps at ticks 0, 10, 20, ...) must give exactly what it gives with a 1 s tick (steps
at 0, 1, 2, ...): no place may treat a tick as a second. And every adapter must step at 0.1 s.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cosim import registry
from cosim.sdk import ticks_per_s, to_ticks

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
START = {"start_utc": "2024-07-15T12:00:00+00:00", "duration_s": 3600, "seed": 3}
ADAPTERS = sorted(registry.available())


def _fill(value, tmp: Path):
    if isinstance(value, str):
        return value.replace("{tmp}", str(tmp))
    if isinstance(value, dict):
        return {k: _fill(v, tmp) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, tmp) for v in value]
    return value


def _started(name: str, tmp: Path, tick_s: float, step_s: float):
    cls = registry.adapter_class(name)
    example = _fill(cls.EXAMPLE, tmp)
    sim_params = cls.SimParams.model_validate(example.get("sim", {}), context={"base_dir": SCENARIOS})
    sim = cls()
    meta = sim.init("sim0", time_resolution=tick_s, step_s=step_s, **START,
                    **sim_params.model_dump(mode="json", exclude_unset=True))
    outputs = {}
    for model, params in example["models"].items():
        if model in cls.ModelParams:
            params = cls.ModelParams[model].model_validate(params, context={"base_dir": SCENARIOS}).model_dump(
                mode="json", exclude_unset=True)
        for entity in sim.create(1, model, **params):
            outputs[entity["eid"]] = meta["models"][model].get("outputs", [])
    return sim, outputs


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("name", ADAPTERS)
def test_whole_second_steps_are_the_same_at_a_tenth_of_a_second_tick(name, tmp_path):
    """20 steps of 1 s, then 30 of 60 s (the half hour where PV, signals and traces move); an
    adapter's ``EXAMPLE["span_s"]`` cuts the 60 s steps to fit (at least one of each)."""
    span_s = registry.adapter_class(name).EXAMPLE.get("span_s", math.inf)
    for step_s, n_steps in ((1, 20), (60, 30)):
        n_fit = max(1, int(min(n_steps, (span_s - (20 if step_s == 60 else 0)) // step_s)))
        _compare_ticks(name, tmp_path / str(step_s), step_s, n_fit)


def _compare_ticks(name: str, tmp_path: Path, step_s: int, n_steps: int) -> None:
    runs = []
    for tick_s in (1.0, 0.1):
        sim, outputs = _started(name, tmp_path / str(tick_s), tick_s, step_s)
        n_per_s, series = ticks_per_s(tick_s), []
        t = 0
        for _ in range(n_steps):
            nxt = sim.step(t, {}, 3600 * n_per_s)
            assert nxt == t + step_s * n_per_s, f"{name}: a {step_s} s step at a {tick_s} s tick returned {nxt} after {t}"
            series.append(sim.get_data(outputs))
            t = nxt
        sim.finalize()
        runs.append(series)
    for k, (a, b) in enumerate(zip(*runs)):
        for eid in a:
            differ = [attr for attr in a[eid] if not _same(a[eid][attr], b[eid][attr])]
            assert not differ, f"{name}: {eid} at step {k} of {step_s} s differs between ticks of 1 s and 0.1 s: {differ}"


@pytest.mark.parametrize("name", ADAPTERS)
def test_every_adapter_steps_at_a_tenth_of_a_second(name, tmp_path):
    sim, outputs = _started(name, tmp_path, 0.1, 0.1)
    t = 0
    for _ in range(15):
        nxt = sim.step(t, {}, 6000)
        assert nxt == t + 1  # one tick
        t = nxt
    for eid, values in sim.get_data(outputs).items():
        for attr, value in values.items():
            assert value is None or isinstance(value, bool) or (
                isinstance(value, (int, float)) and not math.isinf(value)), f"{name}: {eid}.{attr} = {value!r}"
    sim.finalize()


def test_ticks_never_round_silently():
    assert ticks_per_s(1.0) == 1 and ticks_per_s(0.1) == 10 and ticks_per_s(0.01) == 100
    assert to_ticks(0.3, 10) == 3 and to_ticks(60, 100) == 6000
    for bad in (0.3, 0.15, 2.0, 0.0, 1 / 3):
        with pytest.raises(ValueError, match="tick"):
            ticks_per_s(bad)
    with pytest.raises(ValueError, match="not a whole number of 0.1 s ticks"):
        to_ticks(0.25, 10)
