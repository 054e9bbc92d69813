"""The IEEE 8500-node feeder with a GPU campus, a day at 15 min: cosim's cost per step against OpenDSS's own.

Run:  .venv/bin/python bench/bench_feeder8500.py [--repeat 3] [--steps 96]

One process, side by side, alternating within each repeat (a busy machine slows every case alike).
Per-step figures are CPU time of this process (``time.process_time``: the engines, OpenDSS and the
simulators all run in it), which a busy machine disturbs far less than the wall clock:

* ``opendss``: OpenDSS's own work, through opendssdirect on the same feeder file
  (``grid_models/ieee8500.dss``) with the same campus load (a three-phase wye load at the same bus,
  OpenDSS's default load model, the same solver limits as cosim's adapter) driven by the same
  campus p/q series (taken from the direct run's record): per step, set the load's kW/kvar,
  ``Solution.Solve()`` (controls included) and read every node voltage (``Circuit.AllBusMagPu``).
  Set-up: compile the file, add the load, solve once. ``opendss+reads`` adds OpenDSS's own reads
  of what cosim's Grid reports at every step by default (``PDElements.AllPctNorm``,
  ``Circuit.TotalPower``, ``Circuit.Losses``).
* ``direct`` and ``mosaik``: ``cosim.run`` of :data:`SCENARIO` (one 256-GPU DGX-H100 campus behind
  a Load at bus m1166366, the feeder's Grid entity, default recording: what the KPIs read and
  every point of connection) on each engine, once for 1 step and once for ``--steps`` steps; per
  step is ``(cpu(N) - cpu(1)) / (N - 1)`` (``cpu``: the process's CPU time over ``cosim.run``, so
  validation, KPIs and writing the run folder cancel out but for what grows with the steps).
  ``direct-narrow`` is the direct engine recording only the voltages, the import and the campus
  (:data:`NARROW`: no losses or loadings, so the currents behind them are never computed).
  ``direct-loop`` steps the same scenario on the direct engine through a :class:`cosim.Session` and times
  its stepping loop alone, steps 2 to N (CPU time of the process, the recorder's writer thread included;
  no set-up, KPIs or closing to subtract): the steady-state cost per step measured as OpenDSS's is, not as a
  difference of two runs, so it spreads far less from repeat to repeat.
  Set-up is the engine's own wall time (``wall_s`` in metadata.json, from building the simulators
  to the last recorded row) of the 1-step run minus one step's (``(wall(N) - wall(1)) / (N - 1)``).

Prints per-step times [ms], set-ups [s], the ratios (direct/opendss, direct/opendss+reads,
direct-narrow/opendss, mosaik/direct, mosaik set-up over direct set-up) per repeat and their ranges, the process's
resident memory after each case and its peak [MiB], and ``uptime`` before and after; ranges over
the repeats with their medians. Asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from cosim.folder import read_parquet  # noqa: E402
from cosim.run.runner import versions_line  # noqa: E402

STEP_S = 900
FEEDER = ROOT / "grid_models" / "ieee8500.dss"
#: A primary bus of the IEEE 8500-node feeder, where the campus connects.
BUS_8500 = "m1166366"
#: The scenario: one 256-GPU DGX-H100 campus (synthetic training and inference) behind a Load at
#: BUS_8500, the feeder's Grid entity, recording by default; a day at 15 min.
SCENARIO = f"""[scenario]
name = "feeder8500"
start = 2024-07-15T00:00:00Z
duration_s = {96 * STEP_S}
step_s = {STEP_S}
seed = 1
engine = "direct"

[sims.dc]
adapter = "datacenter"

[sims.grid]
adapter = "grid"
network = "ieee8500"
engine = "opendss"

[entities.feeder]
sim = "grid"
model = "Grid"

[entities.campus0]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 256
training = {{ source = "synthetic", n_jobs = 40, sizes_gpus = [8, 16, 32], size_weights = [0.5, 0.3, 0.2], duration_median_h = 3.0 }}
inference = [{{ name = "chat", model = "llama-3.1-70b", replicas = 16, rate_req_s = 50.0, diurnal_amp_frac = 0.5 }}]

[entities.pcc0]
sim = "grid"
model = "Load"
bus = "{BUS_8500}"

[[connect]]
src = "campus0"
dst = "pcc0"
attrs = ["p_mw", "q_mvar"]
"""


#: ``[record] include`` of the ``direct-narrow`` case: the feeder's voltages, import and convergence and
#: the campus with its point of connection, without losses or loadings.
NARROW = ["campus0.*", "pcc0.*", "feeder.vm_*", "feeder.allbus_*", "feeder.n_allbus_violating", "feeder.p_import_mw",
          "feeder.q_import_mvar", "feeder.converged", "feeder.n_nonconverged"]


def rss_mib() -> float:
    """Resident memory of this process now. [MiB]"""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def cosim_run(case: str, n_steps: int, tmp: Path) -> tuple[float, float, pd.DataFrame]:
    """CPU time of ``cosim.run`` [s], the engine's wall time [s] and the recorded time series of an
    ``n_steps`` run of ``case`` (an engine, ``-narrow`` after it for the :data:`NARROW` record)."""
    import cosim

    path = tmp / "feeder8500.toml"
    if not path.exists():
        path.write_text(SCENARIO)
    engine, _, variant = case.partition("-")
    overrides = {"scenario.engine": engine, "scenario.duration_s": n_steps * STEP_S}
    if variant == "narrow":
        overrides["record.include"] = NARROW
    cpu = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrow record leaves out what the grid KPIs read: on purpose
        result = cosim.run(path, out_dir=tmp / "runs", overrides=overrides)
    cpu = time.process_time() - cpu
    if result.status != "ok":
        raise SystemExit(f"{engine} run of {n_steps} steps: {result.status}: {result.metadata.get('reason')}")
    frame = read_parquet(Path(result.run_dir) / "timeseries.parquet")  # not pd.read_parquet: cosim.folder says why
    return cpu, float(result.metadata["wall_s"]), frame


def cosim_loop(n_steps: int, tmp: Path) -> float:
    """CPU time per step [s] of the direct engine's stepping loop over steps 2 to ``n_steps`` of :data:`SCENARIO`
    (default record), stepped by a :class:`cosim.Session` in this process."""
    import cosim

    path = tmp / "feeder8500.toml"
    if not path.exists():
        path.write_text(SCENARIO)
    overrides = {"scenario.engine": "direct", "scenario.duration_s": n_steps * STEP_S}
    with cosim.Session(path, overrides=overrides, out_dir=tmp / "loops", report=False) as session:
        session.step()  # the first step (first reads, first solve) is set-up's
        steps, cpu = 0, time.process_time()
        while not session.done:
            session.step()
            steps += 1
        cpu = time.process_time() - cpu
    return cpu / steps


@functools.lru_cache(maxsize=1)
def _engine():
    """One OpenDSS engine for every bare case: DSS-Python keeps each engine context it creates for
    the life of the process (its callback registries hold them), ~1.5 MiB each on this feeder."""
    import opendssdirect

    dss = opendssdirect.NewContext()
    dss.Basic.AllowChangeDir(False)
    return dss


def opendss_own(p_mw: list[float], q_mvar: list[float], loadings: bool = False) -> tuple[float, float, int]:
    """OpenDSS alone: set-up [s], per step [s] over the steps after the first (CPU time), nodes read
    per step; with ``loadings`` also the bulk reads behind cosim's summary outputs (every PD element's
    loading, the source's power, the circuit's losses)."""
    t0 = time.process_time()
    dss = _engine()
    dss.Text.Command("Clear")
    dss.Text.Command(f'Compile "{FEEDER}"')
    dss.Solution.MaxControlIterations(50)
    dss.Solution.MaxIterations(30)
    dss.Circuit.SetActiveBus(BUS_8500)
    kv_ll = dss.Bus.kVBase() * math.sqrt(3)
    dss.Text.Command(f"New Load.campus bus1={BUS_8500}.1.2.3 phases=3 kv={kv_ll:.6f} conn=wye model=1 "
                     "vminpu=0.95 vmaxpu=1.05 kw=0 kvar=0")

    def step(k: int) -> int:
        dss.Loads.Name("campus")
        dss.Loads.kW(p_mw[k] * 1e3)
        dss.Loads.kvar(q_mvar[k] * 1e3)
        dss.Solution.Solve()
        if not dss.Solution.Converged():
            raise SystemExit(f"OpenDSS did not converge at step {k}")
        n = len(dss.Circuit.AllBusMagPu())
        if loadings:
            dss.PDElements.AllPctNorm(False)
            dss.Circuit.TotalPower()
            dss.Circuit.Losses()
        return n

    n_nodes = step(0)
    t1 = time.process_time()
    for k in range(1, len(p_mw)):
        step(k)
    t2 = time.process_time()
    dss.Text.Command("Clear")
    return t1 - t0, (t2 - t1) / (len(p_mw) - 1), n_nodes


def span(values: list[float], fmt: str) -> str:
    """``low-high (median)`` of the repeats (one difference of two runs can be thrown far off by a pause
    in either, on a busy machine: the median is the figure to quote, with the range)."""
    low, high = min(values), max(values)
    text = f"{low:{fmt}}"
    median = f" ({statistics.median(values):{fmt}})" if len(values) > 2 else ""
    return (text if f"{high:{fmt}}" == text else f"{text}-{high:{fmt}}") + median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repeats of every case (default 3)")
    parser.add_argument("--steps", type=int, default=96, help="steps of the long runs (default 96: a day)")
    parser.add_argument("--engines", default="direct,mosaik,direct-narrow,direct-loop",
                        help="cosim cases to run, the direct engine first (default direct,mosaik,direct-narrow,"
                             "direct-loop)")
    args = parser.parse_args()
    if args.steps < 2 or args.repeat < 1:
        parser.error(f"--steps {args.steps} --repeat {args.repeat}: a per-step figure is a run of --steps minus a run of 1 "
                     "step, so --steps must be at least 2 (the default 96 is a day) and --repeat at least 1")
    engines = args.engines.split(",")
    if engines[0] == "direct-loop":
        parser.error("--engines: put a run case (direct, mosaik or direct-narrow) first: its campus series drives "
                     "OpenDSS alone")
    print(f"versions: {versions_line()}")
    print(f"bench_feeder8500: IEEE 8500 + one campus, {args.steps} steps of {STEP_S} s; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"  before: {uptime()}")
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for engine in engines:  # imports and first-use caches out of the figures
            if engine != "direct-loop":
                cosim_run(engine, 1, tmp)
        for rep in range(args.repeat):
            figures: dict[str, float] = {}
            for engine in engines:
                if engine == "direct-loop":
                    figures["direct-loop_ms"] = cosim_loop(args.steps, tmp) * 1e3
                    figures["direct-loop_rss"] = rss_mib()
                    gc.collect()
                    continue
                cpu_1, wall_1, _ = cosim_run(engine, 1, tmp)
                cpu_n, wall_n, frame = cosim_run(engine, args.steps, tmp)
                figures[f"{engine}_ms"] = (cpu_n - cpu_1) / (args.steps - 1) * 1e3
                figures[f"{engine}_setup_s"] = wall_1 - (wall_n - wall_1) / (args.steps - 1)
                figures[f"{engine}_rss"] = rss_mib()
                if engine == engines[0]:
                    p_mw, q_mvar = frame["campus0.p_mw"].tolist(), frame["campus0.q_mvar"].tolist()
                gc.collect()
            setup, per_step, n_nodes = opendss_own(p_mw, q_mvar)
            figures["opendss_ms"], figures["opendss_setup_s"] = per_step * 1e3, setup
            figures["opendss_rss"] = rss_mib()
            setup, per_step, _ = opendss_own(p_mw, q_mvar, loadings=True)
            figures["opendss+reads_ms"], figures["opendss+reads_setup_s"] = per_step * 1e3, setup
            figures["opendss+reads_rss"] = rss_mib()
            if "direct" in engines:
                figures["direct/opendss"] = figures["direct_ms"] / figures["opendss_ms"]
                figures["direct/opendss+reads"] = figures["direct_ms"] / figures["opendss+reads_ms"]
            if "direct-narrow" in engines:
                figures["direct-narrow/opendss"] = figures["direct-narrow_ms"] / figures["opendss_ms"]
            if "direct-loop" in engines:
                figures["direct-loop/opendss"] = figures["direct-loop_ms"] / figures["opendss_ms"]
            if {"direct", "mosaik"} <= set(engines):
                figures["mosaik/direct"] = figures["mosaik_ms"] / figures["direct_ms"]
                figures["mosaik/direct set-up"] = figures["mosaik_setup_s"] / figures["direct_setup_s"]
            print(f"  repeat {rep + 1}: " + ", ".join(f"{k} {v:.3g}" for k, v in figures.items()), flush=True)
            for key, value in figures.items():
                rows.setdefault(key, []).append(value)
    print(f"  after: {uptime()}")
    print(f"\n  OpenDSS reads {n_nodes} node voltages per step")
    print(f"  {'':<18}{'CPU ms/step':>22}{'set-up s':>22}{'RSS MiB':>18}")
    for name in ["opendss", "opendss+reads", *engines]:
        setups = span(rows[name + "_setup_s"], ".2f") if name + "_setup_s" in rows else "-"
        print(f"  {name:<18}{span(rows[name + '_ms'], '.2f'):>22}{setups:>22}{span(rows[name + '_rss'], '.0f'):>18}")
    for key in ("direct/opendss", "direct-loop/opendss", "direct/opendss+reads", "direct-narrow/opendss",
                "mosaik/direct", "mosaik/direct set-up"):
        if key in rows:
            print(f"  {key:<26}{span(rows[key], '.2f')}x")
    print(f"  peak RSS of the process: {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
