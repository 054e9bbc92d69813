"""PV's look-ahead hint (``PvSim.look_ahead``): the steps it announces are evaluated at once, as
arrays; each step's outputs must be those of the same step taken without the hint, to the bit.

Weather: pvlib's bundled TMY3 year (Greensboro, NC; NREL, Wilcox & Marion 2008) interpolated
linearly to 1-minute steps, as the showcase scenario reads it (it changes every step).
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from cosim.adapters.pv import OUTPUTS, PvSim

SITE = dict(latitude_deg=36.10, longitude_deg=-79.95, altitude_m=273.0)
NAMES = ("ghi_w_m2", "dni_w_m2", "dhi_w_m2", "t_dry_c", "wind_m_s")


def _weather(day: int, step_s: int = 60) -> list[tuple[int, dict]]:
    """``(time from the day's start [s], weather)`` of each step of day ``day`` of the year."""
    import pvlib

    data, _ = pvlib.iotools.read_tmy3(pathlib.Path(pvlib.__file__).parent / "data" / "723170TYA.CSV",
                                      map_variables=True)
    hours = data[["ghi", "dni", "dhi", "temp_air", "wind_speed"]].to_numpy(float)
    steps = []
    for k in range(86_400 // step_s):
        h, frac = divmod(day * 24 + k * step_s / 3600.0, 1.0)
        row = hours[int(h)] + (hours[int(h) + 1] - hours[int(h)]) * frac
        steps.append((k * step_s, dict(zip(NAMES, map(float, row)))))
    return steps


def _sim(**params) -> PvSim:
    sim = PvSim()
    sim.init("pv", time_resolution=1.0, start_utc="2024-07-19T00:00:00+00:00", step_s=60,
             duration_s=86_400, seed=1)
    sim.create(1, "PvPlant", eid="pv", **SITE, p_dc_mw=1.2, p_ac_mw=1.0, **params)
    return sim


def _outputs(sim: PvSim, t: int, inputs: dict) -> np.ndarray:
    sim.step(t, {"pv": {k: {"weather.tmy": v} for k, v in inputs.items()}}, 86_400)
    out = sim.get_data({"pv": list(OUTPUTS)})["pv"]
    return np.array([out[k] for k in OUTPUTS], dtype=float)


@pytest.mark.parametrize("tracking", ["fixed", "single_axis"])
@pytest.mark.parametrize("model", ["haydavies", "klucher"])
def test_steps_announced_by_the_hint_equal_the_steps_without_it(tracking, model):
    """A summer day in blocks of 300 steps. Some announced steps come with other
    weather than announced (every 7th: a different air temperature; every 11th: ghi as an int):
    those are evaluated as usual. Every output of every step equals the run without the hint,
    and the chain was evaluated only for the blocks and the steps that differ from the hint."""
    steps = _weather(200)  # 19 July
    plain, hinted = _sim(tracking=tracking, transposition=model), _sim(tracking=tracking, transposition=model)
    plant = hinted.entities["pv"].plant
    calls, evaluate = [], plant.power
    plant.power = lambda *args, **kwargs: calls.append(1) or evaluate(*args, **kwargs)
    n_differ = n_lit = 0
    for start in range(0, len(steps), 300):
        block = steps[start:start + 300]
        hinted.look_ahead([(t, {"pv": dict(inputs)}) for t, inputs in block])
        for n, (t, inputs) in enumerate(block):
            lit = inputs["ghi_w_m2"] > 0
            n_lit += lit
            if n % 7 == 3:
                inputs = {**inputs, "t_dry_c": inputs["t_dry_c"] + 0.5}
                n_differ += lit
            elif n % 11 == 5 and inputs["ghi_w_m2"] > 1:
                inputs = {**inputs, "ghi_w_m2": int(inputs["ghi_w_m2"])}
                n_differ += lit
            want, got = _outputs(plain, t, inputs), _outputs(hinted, t, inputs)
            assert np.array_equal(want.view(np.int64), got.view(np.int64)), (t, inputs, want, got)
    assert n_lit > 700 and len(calls) <= n_differ + 5, (n_lit, n_differ, len(calls))
