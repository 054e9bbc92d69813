"""Benchmark the default scenario: steps/s, µs per simulator step, grid solve cost, RSS over time.

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_default.py            # one day at 1-minute steps
    .venv/bin/python bench/bench_default.py --year     # a year at 1-minute steps (~525,600 steps)

Prints figures only; README's performance section quotes them with this command.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.sdk import CosimSim  # noqa: E402
from cosim.run import run_scenario  # noqa: E402
from cosim.scenario import load_scenario  # noqa: E402


def rss_mib() -> float:
    """Current resident set size. [MiB]"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


class RssSampler(threading.Thread):
    """Samples RSS every ``period_s`` while a run goes on."""

    def __init__(self, period_s: float = 1.0):
        super().__init__(daemon=True)
        self.period_s, self.samples, self._halt = period_s, [], threading.Event()

    def run(self) -> None:
        start = time.perf_counter()
        while not self._halt.wait(self.period_s):
            self.samples.append((time.perf_counter() - start, rss_mib()))

    def stop(self) -> None:
        self._halt.set()
        self.join()


def instrument_steps() -> dict[str, list[float]]:
    """Wrap every adapter's ``step`` to add up its wall time per class."""
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])

    def wrap(cls):
        original = cls.step

        def timed(self, time_s, inputs, max_advance):
            t0 = time.perf_counter()
            try:
                return original(self, time_s, inputs, max_advance)
            finally:
                entry = spent[f"{cls.__name__}"]
                entry[0] += time.perf_counter() - t0
                entry[1] += 1

        cls.step = timed

    from cosim import registry
    from cosim.run.recorder import RecorderSim

    for name in registry.available():
        wrap(registry.adapter_class(name))
    wrap(RecorderSim)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "default.toml")
    parser.add_argument("--year", action="store_true", help="run 365 days from 2024-01-01")
    args = parser.parse_args()
    overrides = {}
    if args.year:
        overrides = {"scenario.start": "2024-01-01T00:00:00Z", "scenario.duration_s": 365 * 86400}
    from datetime import datetime

    if "scenario.start" in overrides:
        overrides["scenario.start"] = datetime.fromisoformat(overrides["scenario.start"].replace("Z", "+00:00"))
    scn = load_scenario(args.scenario, overrides)
    spent = instrument_steps()
    sampler = RssSampler(period_s=2.0 if args.year else 0.2)
    rss_before = rss_mib()
    sampler.start()
    with tempfile.TemporaryDirectory() as out:
        result = run_scenario(scn, out, progress=True)
        sampler.stop()
        parquet_mib = (result.run_dir / "timeseries.parquet").stat().st_size / 2**20
    steps = result.metadata["steps"]
    wall = result.metadata["wall_s"]
    print(f"\nscenario {scn.scenario.name}: {steps} steps of {scn.scenario.step_s} s, status {result.status}")
    print(f"wall {wall:.1f} s   {steps / wall:,.0f} steps/s   {1e3 * wall / steps:.3f} ms per step (all sims)")
    in_sims = 0.0
    for name, (seconds, calls) in sorted(spent.items(), key=lambda kv: -kv[1][0]):
        if calls:
            in_sims += seconds
            print(f"  {name:<16} {1e6 * seconds / calls:9.1f} µs/step   {calls:>9,} steps   {100 * seconds / wall:5.1f} % of wall")
    print(f"  {'mosaik + rest':<16} {1e6 * (wall - in_sims) / steps:9.1f} µs per scenario step")
    print(f"timeseries.parquet: {parquet_mib:.1f} MiB")
    if sampler.samples:
        n = len(sampler.samples)
        picks = [sampler.samples[int(f * (n - 1))] for f in (0.1, 0.5, 1.0)]
        shown = "  ".join(f"{t:6.0f} s: {r:6.0f} MiB" for t, r in picks)
        print(f"RSS before {rss_before:.0f} MiB; during run at 10/50/100 %: {shown}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    grid_side_by_side(scn)


def grid_side_by_side(scn) -> None:
    """Grid ms/step of the adapter next to pp.runpp and the raw solver, same net, same process."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_grid import bench

    for sid, spec in scn.sims.items():
        if spec.adapter != "grid":
            continue
        buses = [scn.entity_params[e].get("bus") for e, s in scn.entities.items() if s.sim == sid]
        bus = next((b for b in buses if b is not None), None)
        network = scn.sim_params[sid]["network"]
        adapter_ms, runpp_ms, raw_ms = bench(network, bus)
        print(f"grid {network}: adapter {adapter_ms:.3f} ms/step   pp.runpp {runpp_ms:.2f} ms   "
              f"raw lightsim2grid solve {raw_ms:.4f} ms")


if __name__ == "__main__":
    main()
