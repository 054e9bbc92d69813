"""FMU speed: µs per FMU step inside mosaik and FMU-side µs per step, for each shipped FMU.

Run:  .venv/bin/python bench/bench_fmu.py

For each model in ``thermal_fmus/``:

* ``doStep``: the bare ``fmi2DoStep`` call as the adapter makes it (60 s step), CPU time;
* ``FMU-side``: one instance's step as the adapter drives it, CPU time (``FmuInstance.exchange``:
  set the inputs, doStep, read every output through one ``fmi2GetReal`` and convert them; in one
  C call when ``make build`` built ``adapters/fmu/_exchange.so``, else call by call from Python);
* ``adapter``: ``FmuSim.step`` (input summing, unit conversion, FMU calls, outputs dict);
* ``mosaik``: wall time per step of a world (weather signals -> FMU -> recorder at 60 s),
  from the difference between a 3-day and a 1-day run (start-up cancels out): everything
  per step, including mosaik, the signals adapter and the recorder.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fmpy import extract  # noqa: E402

import cosim  # noqa: E402
from cosim.adapters import fmu as fmu_adapter  # noqa: E402
from cosim.adapters.fmu import FmuInstance, describe  # noqa: E402
from cosim.adapters.fmu import calls  # noqa: E402
from cosim.adapters.fmu.calls import FMI2_TRUE  # noqa: E402
from thermal_fmus.build import build_all  # noqa: E402

N_STEPS = 20_000
WEATHER_INPUT = {"ChillerPlant": ("t_wet_c", "t_wet_c"), "DataHall": ("t_dry_c", "t_air_supply_setpoint_c"),
                 "LiquidCooling": ("t_dry_c", "t_dry_c"), "ChilledWaterTank": ("t_dry_c", "t_ambient_c")}
INPUTS = {"ChillerPlant": {"q_load_mw": 1.6, "t_wet_c": 22.0}, "DataHall": {"q_it_mw": 1.5},
          "LiquidCooling": {"q_it_mw": 1.5, "t_dry_c": 28.0}, "ChilledWaterTank": {"q_charge_cmd_mw": 0.1}}

SCENARIO = """
[scenario]
name = "bench_fmu"
start = 2024-07-15T00:00:00Z
duration_s = {duration_s}
step_s = 60

[sims.weather]
adapter = "signals"
file = "{root}/scenarios/data/weather/greensboro_nc_tmy3.csv"
align_year = true
interpolation = "linear"
columns = {{ {src} = "{src}" }}

[sims.cooling]
adapter = "fmu"
fmu = "{model}"

[entities.tmy]
sim = "weather"
model = "Series"

[entities.unit]
sim = "cooling"
model = "{model}"

[[connect]]
src = "tmy"
dst = "unit"
attrs = [["{src}", "{dst}"]]

[record]
include = ["*"]
"""


def fmu_side_us(model: str) -> tuple[float, float]:
    """(bare doStep, the instance's set + doStep + get) per step, CPU time. [µs]"""
    iface = describe(model)
    inst = FmuInstance(iface, extract(str(iface.path)), model, {})
    calls = inst._fmi2  # the adapter's own C calls (FMI 2.0 co-simulation)
    t0 = time.process_time()
    for k in range(N_STEPS):
        calls.t.value, calls.h.value = k * 60.0, 60.0
        calls.do_step(calls.component, calls.t, calls.h, FMI2_TRUE)
    bare = (time.process_time() - t0) / N_STEPS * 1e6
    inputs = INPUTS[model]
    t0 = time.process_time()
    for k in range(N_STEPS, 2 * N_STEPS):
        inst.exchange(inputs, k * 60.0, 60.0)
    side = (time.process_time() - t0) / N_STEPS * 1e6
    inst.close()
    return bare, side


def in_mosaik_us(model: str) -> tuple[float, float]:
    """(adapter step, whole world step) per step of a one-day run at 60 s. [µs]"""
    src, dst = WEATHER_INPUT[model]
    spent = {"s": 0.0, "n": 0}
    original = fmu_adapter.FmuSim.step

    def timed(self, time_s, inputs, max_advance):
        t0 = time.perf_counter()
        try:
            return original(self, time_s, inputs, max_advance)
        finally:
            spent["s"] += time.perf_counter() - t0
            spent["n"] += 1

    fmu_adapter.FmuSim.step = timed
    walls = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for days in (1, 3):
                path = Path(tmp) / f"bench_fmu_{days}.toml"
                path.write_text(SCENARIO.format(root=ROOT, model=model, src=src, dst=dst, duration_s=days * 86_400))
                t0 = time.perf_counter()
                result = cosim.run(path, out_dir=Path(tmp) / "runs")
                walls.append(time.perf_counter() - t0)
                assert result.ok, result.reason
    finally:
        fmu_adapter.FmuSim.step = original
    return spent["s"] / spent["n"] * 1e6, (walls[1] - walls[0]) / (2 * 1440) * 1e6


def main() -> None:
    build_all()
    print(f"{'model':<18}{'doStep µs':>11}{'FMU-side µs':>13}{'adapter µs':>12}{'mosaik µs/step':>16}")
    for path in build_all():
        model = path.stem
        bare, side = fmu_side_us(model)
        adapter, world = in_mosaik_us(model)
        print(f"{model:<18}{bare:>11.2f}{side:>13.2f}{adapter:>12.1f}{world:>16.0f}")
    exchange = "one C call" if calls.EXCHANGE is not None else "call by call (_exchange.so not built)"
    print(f"(doStep/FMU-side: CPU time of {N_STEPS} steps of 60 s, FMU-side in {exchange}; mosaik: (3-day - 1-day wall) / 2880 steps of a "
          "signals -> FMU -> recorder world)")


if __name__ == "__main__":
    main()
