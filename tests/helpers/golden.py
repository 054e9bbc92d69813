"""Golden-run comparison shared by the golden tests: a run's time series against a CSV in
tests/golden/, refreshed only by ``pytest --update-golden`` (then review the diff)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def check_golden(ts: pd.DataFrame, golden: Path, update: bool, rtol: float, atol: float) -> None:
    """Assert ``ts`` equals the golden CSV within ``rtol``/``atol`` on every column (or rewrite it)."""
    ts = ts.astype({c: float for c in ts.columns if ts[c].dtype == bool})
    if update:
        golden.parent.mkdir(exist_ok=True)
        ts.to_csv(golden, float_format="%.12g")
    expected = pd.read_csv(golden, index_col="time_utc", parse_dates=["time_utc"])
    assert list(ts.columns) == list(expected.columns)
    assert (ts.index == expected.index).all()
    np.testing.assert_allclose(ts.to_numpy(float), expected.to_numpy(float), rtol=rtol, atol=atol)
