"""Draw docs/figures/openadr_month.png: three days of scenarios/openadr_month.toml (a VEN answering a
replayed OpenADR 2.0b VTN log): requested and delivered reduction, the site's meter and baseline.

    .venv/bin/python docs/figures/openadr_month.py [--days 31] [--out docs/figures/openadr_month.png]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import cosim  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "openadr_month.toml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=31, help="simulated days from 1 July (the run)")
    parser.add_argument("--show-from", default="2024-07-09", help="first day drawn (three days are drawn)")
    parser.add_argument("--out", default=str(Path(__file__).with_suffix(".png")))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = cosim.run(SCENARIO, out_dir=tmp,
                           overrides={"scenario.duration_s": args.days * 86_400, "scenario.engine": "direct"})
        if not result.ok:
            raise SystemExit(f"run failed: {result.reason}")
        ts = pd.read_parquet(result.run_dir / "timeseries.parquet").set_index("time_utc")
    first = pd.Timestamp(args.show_from, tz="UTC")
    week = ts[(ts.index >= first) & (ts.index < first + pd.Timedelta(days=3))]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    top.plot(week.index, week["responder.p_metered_mw"], lw=0.8, label="site meter (cluster + battery)")
    base = week["responder.p_baseline_mw"].where(week["responder.dr_requested_mw"] > 0)
    top.plot(week.index, base, lw=1.5, label="event baseline (hour before)")
    top.plot(week.index, week["campus.p_mw"], lw=0.6, alpha=0.7, label="GPU cluster")
    top.set_ylabel("MW")
    top.legend(loc="lower left", fontsize=8)
    bottom.step(week.index, week["responder.dr_requested_mw"], where="post", label="requested (VTN event)")
    bottom.plot(week.index, week["responder.dr_delivered_mw"].where(week["events.event_active"].astype(bool)),
                lw=0.9, label="delivered (baseline - meter)")
    bottom.set_ylabel("reduction, MW")
    bottom.legend(loc="upper left", fontsize=8)
    fig.suptitle("OpenADR 2.0b events replayed from a VTN log: three days of scenarios/openadr_month.toml")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
