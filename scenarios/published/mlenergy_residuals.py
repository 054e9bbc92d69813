"""Residuals of the ML.ENERGY cases per model, GPU configuration and batch size, from their runs.

Run: ``.venv/bin/python scenarios/published/mlenergy_residuals.py RUN_DIR [RUN_DIR ...] [--png FILE]``
with the run folders of ``cosim reproduce mlenergy_curves mlenergy_configs`` (e.g.
``runs/reproduce-<time>/mlenergy_curves/saturated/<run>``). For every entity of a run (one
saturated replica at one ``max_batch``) it finds the measured rows of the extract
(scenarios/data/datacenter/mlenergy/, ML.ENERGY Benchmark v3, lm-arena-chat) with that model, GPU,
GPU count and ``max_num_seqs``, and prints a Markdown table of ours / measured - 1 for the GPU
power per GPU and the energy per output token (both rows where the benchmark ran a configuration
twice). ``--png`` also draws them against the batch size, one panel per quantity, one line per
configuration. The figures of the cases are the means of these residuals' magnitudes per configuration.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
EXTRACT = HERE.parent / "data" / "datacenter" / "mlenergy" / "mlenergy_lm_arena_chat.csv"
#: our inference model keys -> ML.ENERGY nicknames (as adapters/datacenter/inference.py MODELS)
MODELS = {"llama-3.1-8b": "Llama 3.1 8B Instruct", "llama-3.1-70b": "Llama 3.1 70B Instruct",
          "llama-3.1-405b-fp8": "Llama 3.1 405B Instruct FP8", "qwen-3-30b-a3b": "Qwen 3 30B A3B Instruct",
          "qwen-3-235b-a22b": "Qwen 3 235B A22B Instruct"}
#: the fewest GPUs per replica ML.ENERGY measured, the adapter's default (mlenergy_curves leaves it out)
DEFAULT_GPUS = {("Llama 3.1 8B Instruct", "H100"): 1, ("Llama 3.1 8B Instruct", "B200"): 1,
                ("Llama 3.1 70B Instruct", "H100"): 4, ("Llama 3.1 70B Instruct", "B200"): 2}


def residuals(run_dir: Path) -> pd.DataFrame:
    """One row per (entity, measured row): configuration, batch, measured and ours, residuals. [W, J, -]"""
    scenario = tomllib.loads((run_dir / "scenario.toml").read_text(encoding="utf-8"))
    kpis = json.loads((run_dir / "kpis.json").read_text(encoding="utf-8"))
    data = pd.read_csv(EXTRACT)
    rows = []
    for eid, ent in scenario["entities"].items():
        fleet = (ent.get("inference") or [None])[0]
        if fleet is None or eid not in kpis.get("datacenter", {}):
            continue
        name, gpu = MODELS[fleet["model"]], ent["node"].removeprefix("DGX-")
        n = fleet.get("n_gpus_per_replica") or DEFAULT_GPUS[(name, gpu)]
        ours = kpis["datacenter"][eid]
        p_w = ours["p_gpu_mean_mw"] * 1e6 / n
        e_j = ours["p_gpu_mean_mw"] * kpis["duration_h"] * 3.6e9 / ours["n_tokens"]
        match = data[(data.nickname == name) & (data.gpu_model == gpu) & (data.num_gpus == n)
                     & (data.max_num_seqs == fleet["max_batch"])]
        for _, row in match.iterrows():
            rows.append({"config": f"{name}, {gpu} x {n}", "max_num_seqs": int(row.max_num_seqs),
                         "p_measured_w": row.avg_power_w_per_gpu, "p_ours_w": p_w,
                         "p_resid_frac": p_w / row.avg_power_w_per_gpu - 1,
                         "e_measured_j": row.energy_per_token_j, "e_ours_j": e_j,
                         "e_resid_frac": e_j / row.energy_per_token_j - 1})
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    lines = ["| configuration | max_num_seqs | power measured / ours [W] | residual | energy per token measured / ours [J] "
             "| residual |", "|---|---:|---:|---:|---:|---:|"]
    for _, r in table.iterrows():
        lines.append(f"| {r.config} | {r.max_num_seqs} | {r.p_measured_w:.0f} / {r.p_ours_w:.0f} | "
                     f"{100 * r.p_resid_frac:+.1f} % | {r.e_measured_j:.4g} / {r.e_ours_j:.4g} | "
                     f"{100 * r.e_resid_frac:+.1f} % |")
    return "\n".join(lines)


def draw(table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
    for (config, rows), marker in zip(table.groupby("config", sort=False), "os^vD<>ph*xP+"):
        rows = rows.sort_values("max_num_seqs")
        for ax, col in zip(axes, ("p_resid_frac", "e_resid_frac")):
            ax.plot(rows.max_num_seqs, 100 * rows[col], marker=marker, label=config, lw=1)
    for ax, title in zip(axes, ("GPU power per GPU", "energy per output token")):
        ax.axhspan(-2, 2, color="#bfe3c9", zorder=0)
        ax.set(xscale="log", xlabel="max_num_seqs (batch)", ylabel="ours / measured - 1 [%]", title=title)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.suptitle("ML.ENERGY v3 lm-arena-chat: residuals per configuration and batch (green: the 2 % bar)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of the ML.ENERGY cases")
    parser.add_argument("--png", type=Path, help="also draw the residuals into this PNG file")
    args = parser.parse_args()
    table = pd.concat([residuals(r) for r in args.runs], ignore_index=True)
    print(markdown(table))
    if args.png:
        draw(table, args.png)


if __name__ == "__main__":
    main()
