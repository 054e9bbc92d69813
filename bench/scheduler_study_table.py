"""Print the scheduler study's comparison table (README "Scheduling policies") from sweep folders.

    .venv/bin/cosim sweep scenarios/sweeps/scheduler_study_sweep.toml --out runs/scheduler_study_philly
    .venv/bin/cosim sweep scenarios/sweeps/scheduler_study_helios_sweep.toml --out runs/scheduler_study_helios
    .venv/bin/python bench/scheduler_study_table.py runs/scheduler_study_philly runs/scheduler_study_helios
"""

from __future__ import annotations

import sys

import pandas as pd

from cosim.folder import read_parquet

S = "kpi.scheduling.campus."
COLUMNS = {  # header -> (column, scale, format)
    "IT MW": (S + "p_it_mean_mw", 1, "{:.3f}"),
    "idle kW": (S + "p_train_idle_mean_mw", 1000, "{:.1f}"),
    "kWh/GPU·h": (S + "e_it_per_done_gpu_h_kwh", 1, "{:.3f}"),
    "done GPU·h": (S + "done_gpu_h", 1, "{:,.0f}"),
    "JCT h": (S + "jct_mean_h", 1, "{:.2f}"),
    "JCT p99 h": (S + "jct_p99_h", 1, "{:.1f}"),
    "wait h": (S + "wait_mean_h", 1, "{:.2f}"),
    "frag GPUs": (S + "n_gpus_frag_mean", 1, "{:.1f}"),
    "frag/idle %": (S + "gpu_frag_of_idle_mean_frac", 100, "{:.1f}"),
    "ρ mean": (S + "ftf_rho_mean_ratio", 1, "{:.2f}"),
    "ρ max": (S + "ftf_rho_max_ratio", 1, "{:.2f}"),
    "asleep nodes": (S + "n_nodes_asleep_mean", 1, "{:.1f}"),
    "shed MW": (S + "dr_shed_mean_mw", 1, "{:.3f}"),
    "shed min MW": (S + "dr_shed_min_mw", 1, "{:.3f}"),
    "vm min pu": ("kpi.feeder.vm_min_pu", 1, "{:.4f}"),
    "import peak MW": ("kpi.feeder.import_peak_mw", 1, "{:.3f}"),
}
ORDER = ["fifo", "easy", "fgd", "pwr", "compass_abs", "themis", "srpt", "elastic"]


def table(folder: str) -> str:
    frame = read_parquet(f"{folder}/sweep.parquet")
    frame = frame[frame["status"] == "ok"]
    frame["order"] = frame["entities.campus.training.policy"].map(ORDER.index)
    frame = frame.sort_values(["entities.campus.nodes.sleep", "order"], ascending=[False, True])
    lines = ["| policy | sleep | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    for _, row in frame.iterrows():
        cells = [fmt.format(row[col] * scale) if col in row and pd.notna(row[col]) else "–"
                 for col, scale, fmt in COLUMNS.values()]
        sleep = "on" if row["entities.campus.nodes.sleep"] else "off"
        lines.append(f"| `{row['entities.campus.training.policy']}` | {sleep} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        print(f"\n{folder}\n")
        print(table(folder))
