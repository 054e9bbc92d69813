"""Cut the datacenter simulator's data extracts from the shared data collection.

Run from the repository root::

    .venv/bin/python scenarios/data/datacenter/make_extracts.py --source /work/shared/data

Every output is deterministic (same input, same bytes). Each sub-folder's README keeps the
source, licence and citation of what it holds.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
#: ML.ENERGY v3 models kept (lm-arena-chat task, H100 and B200): a small, a mid, a large model.
MLENERGY_MODELS = ["Llama 3.1 8B Instruct", "Llama 3.1 70B Instruct", "Llama 3.1 405B Instruct FP8",
                   "Qwen 3 30B A3B Instruct", "Qwen 3 235B A22B Instruct"]


def _gz_csv(frame: pd.DataFrame, path: Path) -> None:
    # mtime=0 keeps the gzip header, and so the bytes, reproducible.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(frame.to_csv(index=False, lineterminator="\n").encode())


def philly(source: Path) -> None:
    out = HERE / "philly"
    out.mkdir(exist_ok=True)
    shutil.copyfile(source / "philly-dre-sampled-jobs/philly_sampled_jobs.csv.gz", out / "philly_sampled_jobs.csv.gz")


def acme(source: Path) -> None:
    out = HERE / "acme"
    out.mkdir(exist_ok=True)
    frame = pd.read_csv(source / "acme-utilization-cdfs/acme_cdfs.csv.gz")
    keep = frame["metric"].isin(["gpu_power", "server_power_gpu_nodes"])
    frame = frame[keep & frame["cluster"].isin(["Seren", "Kalos"])].reset_index(drop=True)
    _gz_csv(frame, out / "acme_power_cdfs.csv.gz")


def zeus(source: Path) -> None:
    out = HERE / "zeus"
    out.mkdir(exist_ok=True)
    for gpu in ("v100", "a40"):
        shutil.copyfile(source / f"zeus-nsdi23-traces/summary_power_{gpu}.csv", out / f"summary_power_{gpu}.csv")


def mlenergy(source: Path) -> None:
    out = HERE / "mlenergy"
    out.mkdir(exist_ok=True)
    frame = pd.read_csv(source / "mlenergy-benchmark-v3/llm_runs.csv")
    keep = (frame["task"] == "lm-arena-chat") & frame["nickname"].isin(MLENERGY_MODELS)
    columns = ["nickname", "model_id", "gpu_model", "num_gpus", "max_num_seqs", "avg_batch_size",
               "avg_power_w_per_gpu", "output_throughput_tok_s", "median_itl_ms", "p99_itl_ms",
               "energy_per_token_j", "avg_output_len_tok"]
    frame[keep][columns].to_csv(out / "mlenergy_lm_arena_chat.csv", index=False, lineterminator="\n")


def azure(source: Path) -> None:
    out = HERE / "azure_llm"
    out.mkdir(exist_ok=True)
    for kind in ("code", "conv"):
        name = f"AzureLLMInferenceTrace_{kind}.csv.gz"
        shutil.copyfile(source / "azure-llm-inference-2023" / name, out / name)


def mooncake(source: Path) -> None:
    out = HERE / "mooncake"
    out.mkdir(exist_ok=True)
    shutil.copyfile(source / "mooncake-fast25-traces/conversation_trace.csv.gz", out / "conversation_trace.csv.gz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("/work/shared/data"))
    source = parser.parse_args().source
    for cut in (philly, acme, zeus, mlenergy, azure, mooncake):
        cut(source)


if __name__ == "__main__":
    main()
