"""Draw ``hosting-8500-m1166366.png``: the lowest voltage on the IEEE 8500-node feeder against the load
added at bus m1166366, with the regulators acting (the figure of the hosting-capacity tutorial).

Each point is one OpenDSS solve of the catalogue feeder (``network = "ieee8500"``) with a balanced
three-phase constant-power load at m1166366, compiled afresh so the RegControls start from the file's
taps, as each run of ``cosim hosting-capacity`` does. Run from the repository root:

    .venv/bin/python docs/figures/hosting_8500.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cosim import grid_models  # noqa: E402
from cosim.adapters.grid.opendss_flow import OpenDssFlow  # noqa: E402

BUS, V_LOW, MAX_MW, STEP_MW = "m1166366", 0.92, 7.2, 0.5
OUT = Path(__file__).with_name("hosting-8500-m1166366.png")


def lowest_vm_pu(p_mw: float) -> tuple[float, float]:
    """The lowest phase voltage over every bus but the source and regulator terminals, and over the
    12.47 kV primary only, with ``p_mw`` at BUS. [pu]"""
    flow = OpenDssFlow(grid_models.dss_file("ieee8500"))
    pos = flow.attach("load", BUS, p_mw, 0.0, "site")
    p = {k: v.copy() for k, v in flow.p0.items()}
    p["load"][pos] = p_mw
    assert flow.solve(p, flow.q0), p_mw
    out = flow.device_outputs()
    skip = set(flow.default_excluded_buses())
    every, primary = [], []
    for pos_bus, (bus_id, phases, kv) in enumerate(zip(flow.ids["bus"], flow.bus_phases, flow.info.bus_kv_base)):
        if pos_bus in skip:
            continue
        values = [out[f"bus_{bus_id}_{ph}_vm_pu"] for ph in phases]
        every += values
        if 1.0 < kv * 3**0.5 < 35.0:
            primary += values
    return float(np.nanmin(every)), float(np.nanmin(primary))


def main() -> None:
    sizes = np.round(np.arange(0.0, MAX_MW + 1e-9, 0.05), 3)
    every, primary = map(np.array, zip(*(lowest_vm_pu(p) for p in sizes)))
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(sizes, every, color="tab:blue", lw=1.4, label="every bus (120 V secondaries included)")
    ax.plot(sizes, primary, color="tab:green", lw=1.4, label="12.47 kV primary only (--voltage-buses primary)")
    ax.axhline(V_LOW, color="tab:red", ls="--", lw=1, label=f"--v-low {V_LOW}")
    failing = every < V_LOW
    ax.fill_between(sizes, 0.895, 0.975, where=failing, color="tab:red", alpha=0.12, step="mid",
                    label="every-bus floor broken")
    scan = np.arange(STEP_MW, MAX_MW + 1e-9, STEP_MW)
    scan_vm = np.interp(scan, sizes, every)
    ok = scan_vm >= V_LOW
    ax.scatter(scan[ok], scan_vm[ok], marker="o", color="k", s=22, zorder=3, label="scan points: hold")
    ax.scatter(scan[~ok], scan_vm[~ok], marker="x", color="k", s=28, zorder=3, label="scan points: fail")
    first = sizes[np.argmax(failing)] - 0.05
    ax.annotate(f"answer: first limit from below\n(~{first:.2f} MW)", (first, V_LOW), xytext=(0.3, 0.899),
                fontsize=8, arrowprops={"arrowstyle": "->", "lw": 0.8})
    ax.set_xlabel(f"load added at {BUS} [MW]")
    ax.set_ylabel("lowest phase voltage [pu]")
    ax.set_ylim(0.895, 0.975)
    ax.set_xlim(0, MAX_MW)
    ax.set_title("IEEE 8500-node feeder: regulators tap up and the voltage recovers", fontsize=10)
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(OUT)


if __name__ == "__main__":
    main()
