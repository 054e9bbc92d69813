"""How the cost of a run grows with its work: time and peak memory per simulated step.

Run:  .venv/bin/python bench/bench_scaling.py [--quick] [--repeat N] [--json FILE] [--plot FILE.png]

Four axes, each case a fresh process on the direct engine (so its peak RSS is its own), on a
scenario this script writes (GPU campuses of DGX-H100 nodes, synthetic training jobs and a Llama
3.1 70B inference fleet, each campus behind a Load at a bus of a grid, the grid's Grid entity,
default recording), all at 5-minute steps:

* duration: one 256-GPU campus on IEEE 33 for 1 day, 1 week, 1 month (30 days) and 1 year
  (365 days, 105,120 steps, measured, not extrapolated; at 1-minute steps a year would take
  ~8 min on a busy 2-core machine); the jobs arrive at the same rate whatever the duration, so
  the work per step is constant (``--quick``: 1 day, 1 week);
* GPUs: one campus of 1k, 10k, 100k and 1M GPUs (80 % training, 20 % inference; jobs and
  requests in proportion) for a day, the datacenter alone (no grid: a 1M-GPU campus draws
  0.5-1 GW, beyond any feeder in the catalogue) (``--quick``: 1k, 10k);
* campuses: 1, 3, 10, 30 and 100 campuses of 20 GPUs each on IEEE 33 for a day, spread over
  its 32 load buses (``--quick``: 1, 3; ``--campuses 30,100 --campus-hours 6``: other counts and
  durations);
* buses: one 256-GPU campus for a day on IEEE 13 (15 buses, OpenDSS), IEEE 33 (33 buses,
  pandapower), IEEE 123 (133 buses, OpenDSS) and IEEE 8500 (4,876 buses, OpenDSS)
  (``--quick``: IEEE 33, IEEE 123).

Per case: set-up (validation, building every simulator) [s], the first step [s] (first calls,
caches), stepping time per simulated step [ms] (the stepping loop with the recorder after the
first step, divided by the steps after the first), closing (KPIs, run
folder) [s], the columns recorded, the recorder's CPU per step and per cell (a column at a step)
[ms, ns] (its steps on the run's thread, its writer thread, and its close, which writes the last
rows: :class:`RecorderMeter`) and the process's peak RSS [MiB]. Per axis, the slope of the cost against the work
on log-log axes (least squares over the points, and between neighbouring points): on the
duration axis the cost is the whole stepping time (1 = linear: a constant time per step); on
the others it is the time per step (1 = in proportion to the work, below 1 = a fixed cost per
step shared by more work). The axis stops being linear at the first pair of neighbouring points
whose slope exceeds 1.2; with ``--repeat N`` (each case N times, the cases in turn each time) a
point stands at its fastest run, and a slope counts as super-linear only when it exceeds 1.2 from
the lower point's slowest run to the higher point's fastest (beyond the runs' spread; one above 1.2 at
the fastest runs only is reported as within the machine's spread). Peak RSS gets its slope too (mostly the imports' ~350 MiB at the
small end). The simulators step on one BLAS thread whatever the machine (``cosim/run/blas.py``:
numpy's dot products over the running jobs of a 1M-GPU campus, tens of thousands, would otherwise go
to OpenBLAS's threads, which on a busy machine wait for a core: measured 72 vs 14 ms a step before
it); ``--blas-threads N`` sets the threads of the rest of each case's process (set-up, closing).
Prints figures; asserts nothing. Full run 76 s on the quiet 2-core machine (2026-12-07; longer on a busy one),
``--repeat 3`` 4 min 20 s, ``--quick`` ~1 min.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.run.runner import versions_line  # noqa: E402

DAY_S = 86_400
STEP_S = 300
#: A campus's GPUs on the duration and buses axes. [-]
N_GPUS = 256
#: GPUs of each campus on the campuses axis (small, so 100 of them still solve on IEEE 33). [-]
N_GPUS_SMALL = 20
#: Buses in each network (the work of the buses axis; OpenDSS's bus count, pandapower's for IEEE 33).
N_BUSES = {"ieee13": 15, "ieee33": 33, "ieee123": 133, "ieee8500": 4876}
#: The bus a single campus sits at, in each network.
CAMPUS_BUS = {"ieee13": "632", "ieee33": "18", "ieee123": "13", "ieee8500": "m1166366"}
#: Load buses of IEEE 33 (bus 1 is the slack), which the campuses of the campuses axis cycle over.
BUSES_33 = [str(b) for b in range(2, 34)]

#: name -> (title, the work's unit (plural), what the slope is taken of)
AXES = {
    "duration": ("duration (1 campus, IEEE 33, 5 min steps)", "days", "total stepping time"),
    "gpus": ("GPUs (1 campus alone, 1 day at 5 min)", "GPUs", "time per step"),
    "campuses": ("campuses (20 GPUs each on IEEE 33, 1 day at 5 min)", "campuses", "time per step"),
    "buses": ("buses (1 campus, 1 day at 5 min)", "buses", "time per step"),
}
#: A slope between neighbouring points above this is called super-linear.
LINEAR_SLOPE_MAX = 1.2


def campus_toml(k: int, n_gpus: int, days: float, bus: str | None) -> str:
    """One campus: 80 % of its GPUs train, 20 % serve; jobs and requests in proportion to its size."""
    n_train = max(8, int(n_gpus * 0.8))
    replicas = max(1, (n_gpus - n_train) // 4)
    n_jobs = max(1, round(n_train / 10 * days))  # a job a day per 10 training GPUs
    sizes = [s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if s <= n_train]
    weights = [0.30, 0.10, 0.15, 0.20, 0.10, 0.06, 0.04, 0.03, 0.015, 0.005][:len(sizes)]
    training = (f'{{ source = "synthetic", n_jobs = {n_jobs}, sizes_gpus = {sizes}, size_weights = {weights}, '
                'duration_median_h = 3.0 }')
    fleet = (f'{{ name = "chat", model = "llama-3.1-70b", replicas = {replicas}, rate_req_s = {3.0 * replicas:.1f}, '
             'diurnal_amp_frac = 0.5 }')
    text = f"""
[entities.campus{k}]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = {n_train}
training = {training}
inference = [{fleet}]
"""
    if bus is not None:
        text += f"""
[entities.pcc{k}]
sim = "grid"
model = "Load"
bus = "{bus}"

[[connect]]
src = "campus{k}"
dst = "pcc{k}"
attrs = ["p_mw", "q_mvar"]
"""
    return text


def scenario_toml(spec: dict) -> str:
    """The scenario of one case: ``network`` (or None: the datacenter alone), ``n_campuses``,
    ``n_gpus`` per campus, ``duration_s``, ``step_s``."""
    network, n = spec["network"], spec["n_campuses"]
    days = spec["duration_s"] / DAY_S
    parts = [f"""[scenario]
name = "scaling"
start = 2024-01-01T00:00:00Z
duration_s = {spec["duration_s"]}
step_s = {spec["step_s"]}
seed = 1
engine = "direct"

[sims.dc]
adapter = "datacenter"
"""]
    if network is not None:
        engine = "" if network == "ieee33" else 'engine = "opendss"'
        parts.append(f"""
[sims.grid]
adapter = "grid"
network = "{network}"
{engine}

[entities.feeder]
sim = "grid"
model = "Grid"
""")
    for k in range(n):
        bus = None if network is None else (CAMPUS_BUS[network] if n == 1 else BUSES_33[k % len(BUSES_33)])
        parts.append(campus_toml(k, spec["n_gpus"], days, bus))
    return "".join(parts)


def axis_cases(quick: bool, campuses: list[int] | None = None,
               campus_hours: float = 24) -> dict[str, list[tuple[float, str, dict]]]:
    """Per axis, its cases: (work, label, spec); ``campuses``/``campus_hours``: the campuses axis's
    counts and duration instead of the defaults."""
    def spec(network, n_campuses=1, n_gpus=N_GPUS, days=1):
        return {"network": network, "n_campuses": n_campuses, "n_gpus": n_gpus, "duration_s": round(days * DAY_S),
                "step_s": STEP_S}
    days = [1, 7] if quick else [1, 7, 30, 365]
    gpus = [1_000, 10_000] if quick else [1_000, 10_000, 100_000, 1_000_000]
    counts = campuses or ([1, 3] if quick else [1, 3, 10, 30, 100])
    networks = ["ieee33", "ieee123"] if quick else ["ieee13", "ieee33", "ieee123", "ieee8500"]
    return {
        "duration": [(float(d), f"{d} day(s)", spec("ieee33", days=d)) for d in days],
        "gpus": [(float(g), f"{g:,} GPUs", spec(None, n_gpus=g)) for g in gpus],
        "campuses": [(float(n), f"{n} campus(es)", spec("ieee33", n_campuses=n, n_gpus=N_GPUS_SMALL,
                                                         days=campus_hours / 24)) for n in counts],
        "buses": [(float(N_BUSES[n]), f"{n} ({N_BUSES[n]:,} buses)", spec(n)) for n in networks],
    }


class RecorderMeter:
    """CPU time of a run's recorder [s]: its steps on the run's thread (thread CPU time of each row it takes,
    the engine's gathering of the row's dicts, a few µs, left out), its writer thread (that thread's CPU clock,
    read when the recorder closes) and its close (the process's CPU time while it closes: the writer writes the
    last rows then, the run's thread waits). Patches the recorder's step and close of this process (a benchmark's
    child); the direct engine's step is left as it is (replacing it would step the simulators by its Python loop,
    not the C one a run takes)."""

    def __init__(self):
        from cosim.run.recorder import ParquetRecorder, RecorderSim

        self.cpu_s = 0.0
        record_refs, close = RecorderSim.record_refs, ParquetRecorder.close
        meter = self

        def timed_step(recorder_sim, t, refs):
            started = time.thread_time()
            try:
                return record_refs(recorder_sim, t, refs)
            finally:
                meter.cpu_s += time.thread_time() - started

        def timed_close(recorder):
            thread = getattr(recorder, "_thread", None)
            if thread is not None and thread.is_alive():
                meter.cpu_s += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            started = time.process_time()
            close(recorder)
            meter.cpu_s += time.process_time() - started

        RecorderSim.record_refs = timed_step
        ParquetRecorder.close = timed_close


def one_case(spec: dict) -> dict:
    """Run one case in this process; its figures."""
    from cosim import Session
    from cosim.run.graph import recorded_columns

    meter = RecorderMeter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scaling.toml"
        path.write_text(scenario_toml(spec))
        t0 = time.perf_counter()
        session = Session(path, out_dir=Path(tmp) / "runs", report=False)
        t1 = time.perf_counter()
        session.step()
        t_first = time.perf_counter()
        session.run_until(spec["duration_s"])
        t2 = time.perf_counter()
        result = session.close()
        t3 = time.perf_counter()
        n_steps = spec["duration_s"] // spec["step_s"]
        n_columns = len(recorded_columns(session.scn))
        return {"ok": bool(result and result.ok), "n_steps": n_steps, "setup_s": t1 - t0,
                "first_step_s": t_first - t1, "step_ms": (t2 - t_first) / max(1, n_steps - 1) * 1e3,
                "run_s": t2 - t1, "close_s": t3 - t2,
                "n_columns": n_columns, "recorder_ms": meter.cpu_s / n_steps * 1e3,
                "recorder_ns_cell": meter.cpu_s / (n_steps * max(1, n_columns)) * 1e9,
                "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_case(spec: dict, blas_threads: int | None = None) -> dict:
    """One case in a fresh process (its own peak RSS), its BLAS on ``blas_threads`` threads (None: as set)."""
    env = dict(os.environ)
    if blas_threads is not None:
        env.update({k: str(blas_threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    out = subprocess.run([sys.executable, __file__, "--case", json.dumps(spec)], capture_output=True, text=True,
                         cwd=ROOT, env=env)
    if out.returncode:
        raise SystemExit(f"case {spec} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x) (nan with fewer than 2 points)."""
    if len(xs) < 2:
        return math.nan
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sxx if sxx else math.nan


def cost(name: str, point: dict) -> float:
    """What the slope of axis ``name`` is taken of: the whole stepping time (duration) or the time per step. [ms]"""
    return point["step_ms"] * point["n_steps"] if name == "duration" else point["step_ms"]


def growth(name: str, points: list[dict]) -> dict:
    """Slopes on log-log axes of the cost and of peak RSS against the work, and where it stops being linear.

    A point measured several times (``step_ms_runs``) stands at its fastest run (the least disturbed by the
    machine's other work); a neighbour's slope counts as super-linear only if it stays above
    :data:`LINEAR_SLOPE_MAX` from the lower point's slowest run to the higher point's fastest (``spread_slopes``,
    the least steep the runs allow); one above it at the fastest runs only is within the machine's spread."""
    works = [p["work"] for p in points]
    costs = [cost(name, p) for p in points]
    local = [loglog_slope(works[i:i + 2], costs[i:i + 2]) for i in range(len(points) - 1)]
    slowest = [cost(name, {**p, "step_ms": max(p.get("step_ms_runs") or [p["step_ms"]])}) for p in points]
    spread = [loglog_slope(works[i:i + 2], [slowest[i], costs[i + 1]]) for i in range(len(points) - 1)]
    stops = next((points[i + 1]["label"] for i, s in enumerate(spread) if s > LINEAR_SLOPE_MAX), None)
    maybe = next((points[i + 1]["label"] for i, s in enumerate(local) if s > LINEAR_SLOPE_MAX), None)
    runs = min(len(p.get("step_ms_runs") or [0]) for p in points)
    fit = loglog_slope(works, costs)
    if math.isnan(fit):
        verdict = "one point: no slope"
    elif stops is not None:
        verdict = f"super-linear from {stops} (slope above {LINEAR_SLOPE_MAX} between neighbours" + (
            f", beyond the spread of {runs} runs each)" if runs > 1 else ")")
    elif maybe is not None:
        verdict = (f"linear within this machine's spread (from {maybe} the fastest runs' slope is above "
                   f"{LINEAR_SLOPE_MAX}, not beyond the spread of {runs} runs each)")
    elif fit < 1 - 0.2:
        verdict = "sub-linear over the axis (a fixed cost per step is shared by more work)"
    else:
        verdict = "linear over the axis"
    return {"slope": fit, "local_slopes": local, "spread_slopes": spread, "stops_linear_at": stops,
            "verdict": verdict,
            "rss_slope": loglog_slope(works, [p["rss_mib"] for p in points]),
            "recorder_slope": recorder_slope(points),
            "setup_slope": loglog_slope(works, [p["setup_s"] for p in points])}


#: The least spread of cells recorded (columns x steps) over an axis, largest over smallest, for a slope of the
#: recorder's CPU against them: over a narrower one (the buses axis records nearly the same columns at every size)
#: the slope is noise divided by almost nothing.
RECORDER_CELLS_SPREAD_MIN = 2.0


def recorder_slope(points: list[dict]) -> float:
    """Log-log slope of the recorder's CPU over the run against the cells it recorded; NaN when the cells vary
    less than :data:`RECORDER_CELLS_SPREAD_MIN`-fold over the axis."""
    cells = [p["n_columns"] * p["n_steps"] for p in points]
    if len(cells) < 2 or max(cells) < RECORDER_CELLS_SPREAD_MIN * min(cells):
        return math.nan
    return loglog_slope(cells, [p["recorder_ms"] * p["n_steps"] for p in points])


def measure_axis(name: str, cases: list[tuple[float, str, dict]], run=run_case, repeat: int = 1) -> dict:
    """Run the cases of one axis ``repeat`` times, the cases in turn each time (a drift of the machine's
    speed reaches every case alike); its points and growth. Each point carries the figures of its fastest run
    and every run's time per step (``step_ms_runs``)."""
    runs: list[list[dict]] = [[] for _ in cases]
    for _ in range(max(1, repeat)):
        for k, (_, _, spec) in enumerate(cases):
            runs[k].append(run(spec))
    points = []
    for (work, label, _), measured in zip(cases, runs):
        fastest = min(measured, key=lambda r: (not r["ok"], r["step_ms"]))  # (a run that ended early is no point)
        points.append({"work": work, "label": label, **fastest, "step_ms_runs": [r["step_ms"] for r in measured]})
    title, unit, of = AXES[name]
    return {"title": title, "unit": unit, "slope_of": of, "points": points, "growth": growth(name, points)}


def print_axis(name: str, axis: dict) -> None:
    print(f"\n{axis['title']}")
    print(f"  {'case':<26} {'steps':>7} {'cols':>5} {'setup s':>8} {'1st s':>6} {'ms/step':>8} {'run s':>7} "
          f"{'close s':>8} {'rec ms':>7} {'ns/cell':>7} {'peak MiB':>9}")
    for p in axis["points"]:
        others = p.get("step_ms_runs") or [p["step_ms"]]
        spread = f"  (runs {min(others):.3f}-{max(others):.3f})" if len(others) > 1 else ""
        print(f"  {p['label']:<26} {p['n_steps']:>7} {p['n_columns']:>5} {p['setup_s']:>8.2f} "
              f"{p['first_step_s']:>6.2f} {p['step_ms']:>8.3f} {p['run_s']:>7.1f} {p['close_s']:>8.2f} "
              f"{p['recorder_ms']:>7.3f} {p['recorder_ns_cell']:>7.0f} "
              f"{p['rss_mib']:>9.0f}" + ("" if p["ok"] else "  (run not ok)") + spread)
    g = axis["growth"]
    local = ", ".join(f"{s:.2f}" for s in g["local_slopes"])
    least = ", ".join(f"{s:.2f}" for s in g.get("spread_slopes", []))
    print(f"  log-log slope of the {axis['slope_of']} against {axis['unit']}: {g['slope']:.2f} "
          f"(neighbours: {local}; the least steep the runs allow: {least}); peak RSS {g['rss_slope']:.2f}, "
          f"set-up {g['setup_slope']:.2f}; the recorder's CPU against cells recorded (columns x steps) "
          + (f"{g['recorder_slope']:.2f}" if not math.isnan(g["recorder_slope"]) else
             f"not given (the cells vary less than {RECORDER_CELLS_SPREAD_MIN:g}-fold over the axis)"))
    print(f"  {g['verdict']}")


def plot(results: dict, path: Path):
    """One panel per axis: time per step and peak RSS against the work, log axes (matplotlib's object API);
    the figure, also saved at ``path``.

    A grey line marks linear growth from the first point: a constant time per step on the
    duration axis, a time per step in proportion to the work on the others.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.10g}")
    axes = results["axes"]
    n_cols = 2 if len(axes) > 1 else 1
    n_rows = math.ceil(len(axes) / n_cols)
    fig = Figure(figsize=(5.2 * n_cols, 3.6 * n_rows + 0.5), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, (name, axis) in zip(fig.subplots(n_rows, n_cols, squeeze=False).flat, axes.items()):
        works = [p["work"] for p in axis["points"]]
        step_ms = [p["step_ms"] for p in axis["points"]]
        linear = [step_ms[0] * (1.0 if name == "duration" else w / works[0]) for w in works]
        ax.loglog(works, linear, ":", color="grey", label="linear from the first point")
        ax.loglog(works, step_ms, "o-", color="tab:blue", label="time per step [ms]")
        runs = [p.get("step_ms_runs") or [p["step_ms"]] for p in axis["points"]]
        if any(len(r) > 1 for r in runs):  # each point at its fastest run, a bar up to its slowest
            ax.vlines(works, step_ms, [max(r) for r in runs], color="tab:blue", alpha=0.5,
                      label=f"its runs' spread ({min(len(r) for r in runs)} runs)")
        rss = ax.twinx()
        rss.loglog(works, [p["rss_mib"] for p in axis["points"]], "s--", color="tab:red", label="peak RSS [MiB]")
        rss.set_ylim(100, 2000)
        ax.set_xlabel(axis["unit"])
        ax.set_ylabel("time per step [ms]", color="tab:blue")
        rss.set_ylabel("peak RSS [MiB]", color="tab:red")
        for a in (ax.xaxis, ax.yaxis, rss.yaxis):
            a.set_major_formatter(plain)
            a.set_minor_formatter(NullFormatter())
        if max(step_ms) < 10 * min(step_ms):  # less than a decade: label the minor ticks too
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.2g}"))
        g = axis["growth"]
        ax.set_title(f"{axis['title']}\nslope {g['slope']:.2f}; {g['verdict'].split(' (')[0]}", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        handles = ax.get_legend_handles_labels()[0] + rss.get_legend_handles_labels()[0]
        ax.legend(handles=handles, fontsize=7, loc="upper left")
    meta = results["meta"]
    fig.suptitle(f"cosim direct engine, 5 min steps, the simulators on one BLAS thread; {meta['date']}, "
                 f"load {meta['load_1min']:.1f} on {meta['n_cpus']} cores{_busy(meta['load_1min'], meta['n_cpus'])}",
                 fontsize=10)
    fig.savefig(path, dpi=110)
    return fig


def _busy(load_1min: float, n_cpus: int | None) -> str:
    """What the load says of the figures: other work on more than half the cores makes them upper bounds."""
    return " (busy machine: upper bounds)" if load_1min > 0.5 * (n_cpus or 1) else ""


def run_all(quick: bool, names: list[str] | None = None, blas_threads: int | None = None,
            campuses: list[int] | None = None, campus_hours: float = 24, repeat: int = 1) -> dict:
    """Every axis (or those named): the figures and when and where they were measured."""
    load = os.getloadavg()
    blas = str(blas_threads) if blas_threads is not None else os.environ.get("OPENBLAS_NUM_THREADS", "default")
    command = ("bench/bench_scaling.py" + (" --quick" if quick else "") + "".join(f" --axis {n}" for n in names or [])
               + (f" --blas-threads {blas_threads}" if blas_threads is not None else "")
               + (f" --campuses {','.join(map(str, campuses))}" if campuses else "")
               + (f" --campus-hours {campus_hours:g}" if campus_hours != 24 else "")
               + (f" --repeat {repeat}" if repeat != 1 else ""))
    meta = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_1min": load[0],
            "n_cpus": os.cpu_count(), "step_s": STEP_S, "blas_threads": blas, "versions": versions_line()}
    print(f"versions: {meta['versions']}")
    print(f"{command}: direct engine, fresh process per case, BLAS threads {blas}; {meta['date']}, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {meta['n_cpus']} cores{_busy(load[0], meta['n_cpus'])}")
    axes = {}
    for name, cases in axis_cases(quick, campuses, campus_hours).items():
        if names and name not in names:
            continue
        axes[name] = measure_axis(name, cases, run=lambda spec: run_case(spec, blas_threads), repeat=repeat)
        if name == "campuses" and campus_hours != 24:
            axes[name]["title"] = axes[name]["title"].replace("1 day", f"{campus_hours:g} h")
        print_axis(name, axes[name])
    meta["load_1min_end"] = os.getloadavg()[0]
    return {"meta": meta, "axes": axes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the two smallest cases per axis (~1 min)")
    parser.add_argument("--axis", action="append", choices=list(AXES), help="only this axis (repeatable)")
    parser.add_argument("--blas-threads", type=int, help="OPENBLAS/OMP/MKL_NUM_THREADS of each case (default: as "
                        "set); its stepping is on one BLAS thread whatever this says")
    parser.add_argument("--campuses", type=lambda v: [int(n) for n in v.split(",")],
                        help="the campuses axis's counts, e.g. 30,100 (default 1,3,10,30,100)")
    parser.add_argument("--campus-hours", type=float, default=24, help="the campuses axis's duration [h] (default 24)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case, the cases in turn each time; a "
                        "point stands at its fastest run and super-linear means beyond the runs' spread (default 1)")
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    parser.add_argument("--plot", type=Path, help="draw the figure (PNG) here")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(json.loads(args.case))))
        return
    results = run_all(args.quick, args.axis, args.blas_threads, args.campuses, args.campus_hours, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
