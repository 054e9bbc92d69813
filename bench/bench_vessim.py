"""The 4-simulator microgrid in Vessim (native) and in cosim (direct, mosaik), side by side: µs per step.

Run:  .venv/bin/python bench/bench_vessim.py [--repeat 3] [--days 7] [--engines direct,mosaik]

The microgrid of ``bench/microgrid/microgrid.toml``: a constant 0.6 MW load, 1 MWac of PV (the
hourly ``pv_week.csv`` shape), a 1 MW / 2 MWh battery in self-consumption and a recorder, at 60 s
steps. Vessim 0.16 (``pip install -e '.[bench]'``) runs the same microgrid natively
(``Environment(backend="native")``): a ``Consumer`` of 600 kW, a ``Producer`` on a ``Trace`` of the PV
shape interpolated to the minute as cosim's ``signals`` adapter interpolates it (Vessim's traces hold
values; fed the minute values they give the same inputs), a ``SimpleBattery`` of 2 MWh at c-rate 0.5
from 50 % SoC with a 10 % floor, the ``GridConnection`` and Vessim's ``Recorder`` keeping its time
series in memory. The battery models differ in detail (cosim's has 95 % charge and discharge
efficiencies; Vessim's SimpleBattery none), which changes neither side's cost per step.

All runs in this one process, the cases alternating within each repeat (a busy machine slows them
alike). cosim's engines run as ``cosim.run`` does (``direct`` in this process: its look-ahead worker
off, as Vessim has none); each figure is the engine's own wall time (cosim: ``wall_s`` of
metadata.json, from building the simulators to the last recorded row; Vessim: ``Environment.run``,
from ``prepare`` to the end). Per step: the whole run over its steps, and the marginal cost, the
``--days`` run minus a one-day run over the steps between them (set-up left out). Prints figures
and the ratio cosim/Vessim per repeat, with ``uptime`` before and after. Asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
from cosim.run.runner import versions_line  # noqa: E402

MICROGRID = ROOT / "bench" / "microgrid"
START = pd.Timestamp("2023-07-10T00:00:00Z")
STEP_S = 60
DAY_S = 86_400


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def pv_minutes_w() -> pd.Series:
    """The PV shape at every minute of the week, linearly interpolated between its rows. [W]"""
    hourly = pd.read_csv(MICROGRID / "pv_week.csv", index_col="time_utc", parse_dates=True)["p_pv_mw"]
    minutes = pd.date_range(hourly.index[0], hourly.index[-1], freq=f"{STEP_S}s")
    series = hourly.reindex(hourly.index.union(minutes)).interpolate("time").reindex(minutes)
    return series.tz_localize(None) * 1e6


def vessim_native(duration_s: int, pv_w: pd.Series) -> float:
    """Wall time of Vessim's native run of the microgrid. [s]"""
    import vessim as vs

    env = vs.Environment(sim_start=START.tz_localize(None), step_size=STEP_S)
    env.add_microgrid(
        actors=[vs.Consumer("site", 600_000.0),
                vs.Producer("pv", vs.Trace(pv_w, anchor=pv_w.index[0]))],
        dispatchables=[vs.SimpleBattery("bess", capacity=2e6, initial_soc=0.5, min_soc=0.1, c_rate=0.5),
                       vs.GridConnection()])
    env.add_controller(vs.Recorder())
    t0 = time.perf_counter()
    result = env.run(until=duration_s)
    wall = time.perf_counter() - t0
    if result.steps != duration_s // STEP_S:
        raise SystemExit(f"vessim ran {result.steps} steps, not {duration_s // STEP_S}")
    return wall


def cosim_engine(engine: str, duration_s: int, tmp: Path) -> float:
    """``wall_s`` of cosim's run of the microgrid on ``engine``. [s]"""
    import cosim

    result = cosim.run(MICROGRID / "microgrid.toml", out_dir=tmp,
                       overrides={"scenario.engine": engine, "scenario.ahead": "off",
                                  "scenario.duration_s": duration_s})
    if result.status != "ok" or result.metadata["steps"] != duration_s // STEP_S:
        raise SystemExit(f"cosim {engine}: {result.status} after {result.metadata.get('steps')} steps")
    return float(result.metadata["wall_s"])


def span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    text = f"{low:{fmt}}"
    return text if f"{high:{fmt}}" == text else f"{text}-{high:{fmt}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repeats of every case (default 3)")
    parser.add_argument("--days", type=int, default=7, help="days of the long runs (default 7: 10,080 steps)")
    parser.add_argument("--engines", default="direct,mosaik", help="cosim engines (default direct,mosaik)")
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    long_s = args.days * DAY_S
    n_long, n_day = long_s // STEP_S, DAY_S // STEP_S
    pv_w = pv_minutes_w()
    print(f"versions: {versions_line()}")
    print(f"bench_vessim: the 4-simulator microgrid, {n_long} steps of {STEP_S} s; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"  before: {uptime()}")
    cases = ["vessim", *engines]
    whole: dict[str, list[float]] = {c: [] for c in cases}
    marginal: dict[str, list[float]] = {c: [] for c in cases}
    ratios: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for rep in range(args.repeat):
            walls = {}
            for case in cases:
                run = (lambda s: vessim_native(s, pv_w)) if case == "vessim" else \
                    (lambda s, e=case: cosim_engine(e, s, tmp))
                day, week = run(DAY_S), run(long_s)
                gc.collect()
                walls[case] = week
                whole[case].append(week / n_long * 1e6)
                marginal[case].append((week - day) / (n_long - n_day) * 1e6)
            line = ", ".join(f"{c} {whole[c][-1]:.1f} us/step (marginal {marginal[c][-1]:.1f})" for c in cases)
            print(f"  repeat {rep + 1}: {line}", flush=True)
            for case in engines:
                ratios.setdefault(f"{case}/vessim", []).append(whole[case][-1] / whole["vessim"][-1])
                ratios.setdefault(f"{case}/vessim marginal", []).append(marginal[case][-1] / marginal["vessim"][-1])
    print(f"  after: {uptime()}")
    print(f"\n  {'':<8}{'us/step (whole run)':>22}{'us/step (marginal)':>22}")
    for case in cases:
        print(f"  {case:<8}{span(whole[case], '.1f'):>22}{span(marginal[case], '.1f'):>22}")
    for key, values in ratios.items():
        print(f"  {key:<26}{span(values, '.2f')}x")


if __name__ == "__main__":
    main()
