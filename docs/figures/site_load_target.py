"""Draw docs/figures/site_load_target.png: a 1,024-GPU campus served by ``cosim serve`` (in this process,
on a loopback port, 0.003 s of wall time per simulated second) takes two load targets through
``PUT /site/campus/load-target``: one it can meet along its ramp, then one below its idle draw (a breach).
The delivered power is the run folder's ``campus.p_mw``; the targets and events are the server's answers.

    .venv/bin/python docs/figures/site_load_target.py [--out docs/figures/site_load_target.png]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

import httpx
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cosim.live import LiveRun, load_live  # noqa: E402
from cosim.live.server import LiveServer, bind  # noqa: E402

SCENARIO = """[scenario]
name = "site_target_figure"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 60

[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 1024
rated_mw = 2.0
training = { source = "synthetic", n_jobs = 40, span_s = 600 }
"""

#: (simulated time to send it at [s], the PUT body)
TARGETS = [(900, {"target_p_mw": 0.55, "ramp_mw_per_min": 0.05, "hold_s": 1800}),
           (3900, {"target_p_mw": 0.30, "ramp_mw_per_min": 0.10, "hold_s": None})]


def _wait_for(client: httpx.Client, t_s: float, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        measured = client.get("/site/campus/power-status").json().get("measured_at_s")
        if measured is not None and measured >= t_s:
            return
        time.sleep(0.02)
    raise SystemExit(f"the run did not reach t = {t_s} s in {timeout_s} s of wall time")


def _path(target: dict) -> tuple[list[float], list[float]]:
    """The target as the API defines it: a ramp from the measured draw, then the level until its end. [s], [MW]"""
    end = target["end_s"] if target["end_s"] is not None else 7200
    return ([target["start_s"], target["ramp_end_s"], end],
            [target["start_p_mw"], target["target_p_mw"], target["target_p_mw"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rt-factor", type=float, default=0.003, help="wall seconds per simulated second")
    parser.add_argument("--out", default=str(Path(__file__).with_suffix(".png")))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "site.toml"
        path.write_text(SCENARIO)
        run = LiveRun(load_live(path, {}, args.rt_factor), Path(tmp) / "runs", report=False)
        server = LiveServer(run, bind("127.0.0.1", 0), say=lambda text: None)
        thread = threading.Thread(target=server.serve, daemon=True)
        thread.start()
        targets = []
        with httpx.Client(base_url=server.url, timeout=10.0) as client:
            for t_s, body in TARGETS:
                _wait_for(client, t_s)
                answer = client.put("/site/campus/load-target", json=body)
                answer.raise_for_status()
                targets.append(answer.json()["target"])
            run.wait(300)
            with client.stream("GET", "/site/campus/events", timeout=60.0) as stream:  # ends with the run
                events = [json.loads(line[len("data: "):]) for line in stream.iter_lines() if line.startswith("data: ")]
        server.shutdown()
        thread.join(timeout=30)
        ts = pd.read_parquet(run.run_dir / "timeseries.parquet")
    minutes = (ts["time_utc"] - ts["time_utc"][0]).dt.total_seconds() / 60
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.step(minutes, ts["campus.p_mw"], where="post", label="delivered: campus.p_mw (run folder)")
    for i, target in enumerate(targets):
        x, y = _path(target)
        ax.plot([v / 60 for v in x], y, color="C1", ls="--", lw=1.5, label="target (ramp, then level)" if not i else None)
    marks = {"ramp_end": ("v", "C2"), "target_not_met": ("x", "C3"), "target_released": ("o", "C7")}
    for kind, (marker, color) in marks.items():
        picked = [e for e in events if e["event"] == kind]
        if picked:
            ax.scatter([e["time_s"] / 60 for e in picked], [e["p_mw"] for e in picked], marker=marker, color=color,
                       zorder=3, label=f"event {kind}")
    ax.set_ylim(0, 0.9)
    ax.set_xlabel("minutes of simulated time")
    ax.set_ylabel("MW")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("PUT /site/campus/load-target: 0.55 MW (met), then 0.30 MW (below the idle draw: a breach)", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out, [e["event"] for e in events])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
