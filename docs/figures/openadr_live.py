"""Draw docs/figures/openadr_live.png: a live run acting as an OpenADR 2.0b VEN (cosim.live.ven)
against the loopback VTN of examples/openadr_vtn.py, on a fast clock: the reduction the VTN asked
and the one the site delivered, and the site's meter as recorded and as the VTN received it.

    .venv/bin/python -W ignore docs/figures/openadr_live.py [--rt-factor 0.0006] [--out docs/figures/openadr_live.png]

The VTN sends a 0.4 MW LOAD_DISPATCH delta from 2 h to 4 h after the run's start (15 min ramp-up)
and stops answering at 3 h 30 min: the run keeps the accepted event to its end. Takes ~20 s.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cosim.live import LiveRun, load_live  # noqa: E402
from cosim.live.ven import LiveVen  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "openadr_live_ven.toml"
EVENT_H, VTN_DIES_H = (2.0, 4.0), 3.5


def _vtn_module():
    spec = importlib.util.spec_from_file_location("openadr_vtn", ROOT / "examples" / "openadr_vtn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _live(rt_factor: float, out: Path) -> tuple[pd.DataFrame, list, dict, datetime]:
    example, received, answers = _vtn_module(), [], []
    port = example.free_port()
    server = await example.vtn(port, received.extend)
    start = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    scn = load_live(SCENARIO, {"scenario.start": start}, rt_factor)
    run = LiveRun(scn, out, report=False)
    ven = LiveVen(run, f"http://127.0.0.1:{port}/OpenADR2/Simple/2.0b", say=print)
    alive = True
    try:
        await asyncio.to_thread(ven.start)
        example.send(server, "ven-campus", start + timedelta(hours=EVENT_H[0]),
                     timedelta(hours=EVENT_H[1] - EVENT_H[0]), 0.4, answers.append)
        while not answers:
            await asyncio.sleep(0.05)
        run.start()
        while (run.last_step_s or 0) < VTN_DIES_H * 3600:
            await asyncio.sleep(0.02)
        await server.stop()
        alive = False
        await asyncio.to_thread(run.wait, 120)
    finally:
        await asyncio.to_thread(run.stop)
        await asyncio.to_thread(ven.close)
        if alive:
            await server.stop()
    ts = pd.read_parquet(run.run_dir / "timeseries.parquet").set_index("time_utc")
    return ts, received, ven.status(), start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rt-factor", type=float, default=0.0006, help="wall seconds per simulated second")
    parser.add_argument("--out", default=str(Path(__file__).with_suffix(".png")))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ts, received, status, start = asyncio.run(_live(args.rt_factor, Path(tmp)))
    hours = (ts.index - pd.Timestamp(start)).total_seconds() / 3600
    got = pd.Series([v for _, v in received], index=[(t - start).total_seconds() / 3600 for t, _ in received])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True)
    top.step(hours, ts["responder.dr_requested_mw"], where="post", label="requested by the VTN")
    top.plot(hours, ts["responder.dr_delivered_mw"], lw=1.2, label="delivered (baseline - site meter)")
    top.set_ylabel("reduction [MW]")
    bottom.plot(hours, ts["responder.p_metered_mw"], lw=1.2, label="site meter, recorded (parquet)")
    bottom.plot(got.index, got.to_numpy(), ".", ms=4, label="site meter, received by the VTN")
    bottom.step(hours, ts["responder.p_baseline_mw"], where="post", ls="--", lw=0.8, label="event baseline")
    bottom.set_ylabel("power [MW]")
    bottom.set_xlabel("hours from the run's start")
    for ax in (top, bottom):
        ax.axvspan(VTN_DIES_H, hours.max(), color="0.9", zorder=0)
        ax.legend(loc="lower left", fontsize=8)
        ax.grid(alpha=0.3)
    top.text(VTN_DIES_H + 0.05, top.get_ylim()[1] * 0.85, "VTN unreachable", fontsize=8)
    fig.suptitle("A live run as an OpenADR 2.0b VEN: a 0.4 MW LOAD_DISPATCH event, the VTN lost mid-event")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}; VEN status: vtn {status['vtn']}, {status['n_readings_sent']} readings sent, "
          f"{status['n_readings_pending']} not sent")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
