"""Draw docs/figures/npcc_campuses.png: four PERC1 campuses on NPCC 140 through one fault, uniform vs staggered.

Runs ``scenarios/npcc_perc1_campuses.toml`` (every site reconnects 0.5 s after the voltage recovers,
over 1 s) and ``scenarios/npcc_perc1_campuses_staggered.toml`` (0.5, 1.5, 2.5, 3.5 s delays, 1-3 s
ramps) and plots, for each, every campus's connected share (``p_connected_frac``) and the
centre-of-inertia frequency of the 48 machines (``npcc.f_hz``).

    .venv/bin/python docs/figures/npcc_campuses.py      # ~15 s
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import matplotlib
import pandas as pd

import cosim

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SITES = ("ludlow", "northfield", "manchester", "carpenter")
RUNS = {"uniform reconnection": "npcc_perc1_campuses.toml", "staggered reconnection": "npcc_perc1_campuses_staggered.toml"}


def main() -> None:
    frames = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, name in RUNS.items():
            result = cosim.run(ROOT / "scenarios" / name, out_dir=Path(tmp), overrides={"scenario.engine": "direct"})
            assert result.ok, result.reason
            frames[label] = pd.read_parquet(Path(result.run_dir) / "timeseries.parquet")
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True, sharey="row")
    for col, (label, ts) in enumerate(frames.items()):
        t = [k * 0.1 for k in range(len(ts))]
        for k, site in enumerate(SITES):
            axes[0, col].step(t, ts[f"{site}.p_connected_frac"], f"C{k}-", where="post", label=site)
        axes[1, col].plot(t, ts["npcc.f_hz"], "k-")
        axes[0, col].set_title(label)
        axes[1, col].set_xlabel("time [s] (fault at Ludlow, bus 30: 1.0-1.1 s)")
    axes[0, 0].set_ylabel("P connected [-]")
    axes[1, 0].set_ylabel("COI frequency [Hz]")
    axes[0, 0].legend(loc="lower right", fontsize=8)
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(Path(__file__).with_suffix(".png"), dpi=110)


if __name__ == "__main__":
    main()
