"""Draw docs/figures/helics_loopback.png: examples/helics/ run as a federation on one machine (a HELICS
broker on loopback, the feeder federate of examples/helics/feeder.py, cosim as the second federate),
then plotted from the run folder: the campus's P published to the feeder, the bus voltage it sent back
and the controller's throttle.

    .venv/bin/python docs/figures/helics_loopback.py [--engine mosaik] [--out docs/figures/helics_loopback.png]
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import threading
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cosim.run.federate import load_config, run_federate  # noqa: E402  (loads pyarrow, then helics)
import helics as h  # noqa: E402
from cosim.scenario import load_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "helics"


def _feeder():
    spec = importlib.util.spec_from_file_location("helics_feeder", EXAMPLE / "feeder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loopback():
    spec = importlib.util.spec_from_file_location("helics_loopback_broker", EXAMPLE / "loopback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="mosaik", choices=("mosaik", "direct"))
    parser.add_argument("--out", default=str(Path(__file__).with_suffix(".png")))
    args = parser.parse_args(argv)
    feeder = _feeder()
    broker, address = _loopback().start_broker(2)
    scn = load_scenario(EXAMPLE / "campus.toml", {"scenario.engine": args.engine})
    duration_s = float(scn.scenario.duration_s)
    received: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "federate.toml"
        config.write_text((EXAMPLE / "federate.toml").read_text().replace("127.0.0.1:23500", address))
        thread = threading.Thread(target=lambda: received.extend(feeder.run(address, duration_s)))
        thread.start()
        result = run_federate(scn, load_config(config, scn), Path(tmp) / "runs", report=False)
        thread.join(timeout=60)
        h.helicsBrokerDisconnect(broker)
        if not result.ok:
            raise SystemExit(f"run failed: {result.reason}")
        ts = pd.read_parquet(result.run_dir / "timeseries.parquet").set_index("time_utc")
    start = ts.index[0]
    minutes = (ts.index - start).total_seconds() / 60
    # the feeder's answers: the voltage of the P it received at t, which cosim's controller uses at t + step
    sent_v = pd.Series([feeder.vm_pu(p_mw) for _, p_mw in received], index=[t / 60 for t, _ in received])
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(9, 6.5), sharex=True)
    top.step(minutes, ts["campus.p_mw"], where="post", label="campus.p_mw (published by cosim)")
    top.set_ylabel("MW")
    top.legend(loc="lower right", fontsize=8)
    middle.step(sent_v.index, sent_v.values, where="post", color="C1",
                label="feeder/bus_vm_pu (published by the feeder)")
    middle.axhline(0.95, color="grey", lw=0.8, ls="--", label="0.95 pu")
    middle.set_ylabel("bus voltage, pu")
    middle.legend(loc="upper right", fontsize=8)
    bottom.step(minutes, ts["vctl.throttle_frac"], where="post", color="C2", label="vctl.throttle_frac")
    bottom.set_ylabel("throttle, fraction")
    bottom.set_xlabel(f"minutes from {start:%Y-%m-%d %H:%M} UTC")
    bottom.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"cosim ({args.engine} engine) and a feeder federate joined through a HELICS broker on loopback")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
