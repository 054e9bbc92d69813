"""Draw docs/guides/img/compliance_slg_itic.png: the ride-through figure of a run of
scenarios/ieee13_fault_ride_through.toml (the report's own drawing, cosim/report/figures.py).

    .venv/bin/python docs/make_compliance_figure.py [--out docs/guides/img/compliance_slg_itic.png]

Runs the scenario on the direct engine into a temporary folder (~1 s of simulation), then draws the
report's ``ride_through`` figure from its run folder: the same picture report.html shows.
"""

from __future__ import annotations

import argparse
import base64
import tempfile
from pathlib import Path

import cosim
from cosim.folder import RunFolder
from cosim.report import read_series
from cosim.report.figures import FigureInput, fig_ride_through

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "ieee13_fault_ride_through.toml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "guides" / "img" / "compliance_slg_itic.png"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = cosim.run(SCENARIO, out_dir=tmp, overrides={"scenario.engine": "direct"})
        folder = RunFolder(result.run_dir)
        png = fig_ride_through(FigureInput(read_series(result.run_dir), folder.roles(), folder.entity_info(),
                                           kpis=result.kpis))
    Path(args.out).write_bytes(base64.b64decode(png))
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
