"""Golden scenario: the default study cut to two midday hours, end to end through mosaik, compared
with ``tests/golden/golden_short.csv``.

Tolerance: relative 1e-7 and absolute 1e-9 on every column — loose enough for BLAS and
solver round-off across machines, tight enough that any change of physics, data, alignment
or sign shows. Refresh deliberately with ``pytest tests/test_golden.py --update-golden`` and
review the diff.
"""

from __future__ import annotations

from pathlib import Path

from golden import check_golden
from kpi_units import unitless_kpis

import cosim

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "golden_short.toml"
GOLDEN = HERE / "golden" / "golden_short.csv"
RTOL, ATOL = 1e-7, 1e-9


def test_golden_short(tmp_path, update_golden):
    result = cosim.run(SCENARIO, out_dir=tmp_path)
    assert result.ok, result.reason
    check_golden(result.timeseries(), GOLDEN, update_golden, RTOL, ATOL)
    assert not unitless_kpis(result.kpis), "KPI keys without a unit suffix"
    roles = result.metadata["roles"]["entities"]
    assert roles["campus"] == "it" and roles["plant"] == "cooling" and roles["feeder"] == "grid"
