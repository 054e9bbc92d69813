"""Draw docs/figures/perc1_native_vs_cosim.png: PERC1 inside ANDES vs co-simulated, IEEE 39, three faults.

Runs ``scenarios/interconnection_study.toml`` twice with its faults moved to 2, 5 and 8 s, 12 s long,
ANDES at 1/60 s: once with PERC1 in ``ride_through`` (co-simulated: it sees the voltage a cosim step
late) and once with PERC1 on the ``andes_grid`` Load (native: inside the integration). Plots the
campus's connected share, its grid draw and the bus voltage (lowest over each 0.1 s step).

    .venv/bin/python docs/figures/perc1_native_vs_cosim.py      # ~30 s on 2 cores
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
PERC1 = ("perc1 = { vt0_pu = 0.5, vt1_pu = 0.7, fcease_frac = 1.0, frecon_frac = 0.9, t_recon_delay_s = 0.5, "
         "t_recon_s = 2.0 }")


def scenario(folder: Path, native: bool) -> Path:
    text = (ROOT / "scenarios" / "interconnection_study.toml").read_text().replace("duration_s = 45", "duration_s = 12")
    text = text.replace("faults = [[10.0, 0.1, 16, 0.02], [22.0, 0.1, 16, 0.02], [34.0, 0.1, 16, 0.02]]",
                        "faults = [[2.0, 0.1, 16, 0.02], [5.0, 0.1, 16, 0.02], [8.0, 0.1, 16, 0.02]]\n"
                        "dt_s = 0.016666666666666666")
    if native:
        text = text.replace(PERC1 + "\n", "").replace('model = "Load"\nbus = 16', f'model = "Load"\nbus = 16\n{PERC1}')
    path = folder / ("native.toml" if native else "cosim.toml")
    path.write_text(text)
    return path


def main() -> None:
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for native in (False, True):
            result = cosim.run(scenario(Path(tmp), native), out_dir=Path(tmp) / "runs")
            assert result.ok, result.reason
            runs[native] = pd.read_parquet(Path(result.run_dir) / "timeseries.parquet")
    t = [k * 0.1 for k in range(len(runs[True]))]
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    share = {False: runs[False]["ups.p_connected_frac"], True: runs[True]["pcc.p_connected_frac"]}
    for native, style, label in ((False, "C1--", "co-simulated (ride_through)"), (True, "C0-", "native (inside ANDES)")):
        axes[0].step(t, share[native], style, where="post", label=label)
        axes[1].step(t, runs[native]["pcc.p_mw"], style, where="post", label=label)
        axes[2].step(t, runs[native]["pcc.vm_min_pu"], style, where="post", label=label)
    axes[0].set_ylabel("P connected [-]")
    axes[1].set_ylabel("grid draw [MW]")
    axes[2].set_ylabel("bus 16 V min [pu]")
    axes[2].set_xlabel("time [s] (faults at 2, 5, 8 s; UPS dip counter trips at the third)")
    axes[0].legend(loc="lower left")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("PERC1 on IEEE 39 bus 16, ~200 MW campus, three 100 ms faults")
    fig.tight_layout()
    out = Path(__file__).with_suffix(".png")
    fig.savefig(out, dpi=90)
    print(out)


if __name__ == "__main__":
    main()
