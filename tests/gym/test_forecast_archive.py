"""The ``archive`` forecast error model (cosim/gym/forecasts.py, cosim/gym/observations.py): leads >= 1
read from a file of issued forecasts, lead 0 the signal as for the oracle, only issues made by the
decision time, and every wrong file one problem naming its key, value and fix.

The archives here are small CSVs written by each test (no archive ships with cosim). The scenario
is a 2-hour day of the example price file (USD/MWh near 40-95 overnight) with 15-minute decisions,
so decisions fall at 00:00, 00:15, ... 02:00 UTC on 2024-07-15; every archive value is far from the
price file's, so a window that shows the truth cannot pass for the archive's.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main
from cosim.errors import ScenarioError
from cosim.gym import CosimEnv
from cosim.gym.forecasts import read_archive

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"
START = datetime(2024, 7, 15, tzinfo=timezone.utc)
N, STEP_S, DECISION_S = 4, 3600, 900

SCENARIO = f"""
[scenario]
name = "archive_check"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 300

[sims.prices]
adapter = "signals"
file = "{DATA / 'tariffs' / 'example_hourly_prices_usd_kwh.csv'}"
repeat = true
columns = {{ price_usd_mwh = {{ column = "price_usd_kwh", from_unit = "usd/kWh" }} }}

[sims.storage]
adapter = "battery"

[entities.price]
sim = "prices"
model = "Series"

[entities.bess]
sim = "storage"
model = "Battery"
e_capacity_mwh = 1.0
p_charge_max_mw = 0.5
p_discharge_max_mw = 0.5

[agent]
decision_s = {DECISION_S}
observations = ["price.price_usd_mwh"]
time_features = false
actions = [{{ input = "bess.p_set_mw" }}]
reward = {{ energy_cost_usd = -1.0 }}
"""


def iso(hours: float, day: int = 15) -> str:
    return (datetime(2024, 7, day, tzinfo=timezone.utc) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def hourly(first_h: int, last_h: int, value=lambda h: 500.0 + h) -> str:
    """An archive without issued_utc: one row per hour of 2024-07-15 from first_h to last_h."""
    return "time_utc,price_usd_mwh\n" + "".join(f"{iso(h)},{value(h)}\n" for h in range(first_h, last_h + 1))


def env_for(folder: Path, csv: str | None, error: dict | None, **keys) -> CosimEnv:
    """The scenario in ``folder`` with one price forecast (n = 4, hourly) whose error is ``error``,
    the archive text ``csv`` written to ``folder/forecast.csv``."""
    if csv is not None:
        (folder / "forecast.csv").write_text(csv)
    (folder / "archive.toml").write_text(SCENARIO)
    forecast = {"signal": "price.price_usd_mwh", "n": N, "step_s": STEP_S}
    return CosimEnv(folder / "archive.toml", forecasts=[dict(forecast, **({"error": error} if error else {}))],
                    guards=False, **keys)


def windows(env: CosimEnv, seed: int = 0) -> np.ndarray:
    """The forecast window at every decision of one episode (rows: decisions 00:00 ... 02:00)."""
    columns = [i for i, name in enumerate(env.observation_names) if "@+" in name]
    seen = [env.reset(seed=seed)[0]]
    terminated = False
    while not terminated:
        obs, _, terminated, _, _ = env.step(env.idle_action())
        seen.append(obs)
    env.close()
    return np.array(seen)[:, columns]


def decisions() -> list[datetime]:
    return [START + timedelta(seconds=j * DECISION_S) for j in range(7200 // DECISION_S + 1)]


ARCHIVE = {"model": "archive", "file": "forecast.csv", "column": "price_usd_mwh"}


def test_the_archive_shows_the_files_values_from_lead_one_and_the_signal_at_lead_zero(tmp_path):
    archived = windows(env_for(tmp_path, hourly(0, 6), ARCHIVE))
    oracle = windows(env_for(tmp_path, None, None))
    expected = [[500.0 + math.floor((t + timedelta(hours=k) - START).total_seconds() / 3600) for k in range(1, N)]
                for t in decisions()]  # hold: a row's value applies until the next row
    np.testing.assert_array_equal(archived[:, 1:], expected)
    np.testing.assert_array_equal(archived[:, 0], oracle[:, 0])  # lead 0: the signal, as the oracle shows it
    assert np.all(np.abs(oracle[:, 1:] - archived[:, 1:]) > 300)  # not the truth
    linear = windows(env_for(tmp_path, None, dict(ARCHIVE, interpolation="linear")))
    minutes = np.array([(t - START).total_seconds() / 3600 for t in decisions()])
    np.testing.assert_allclose(linear[:, 1:], 500.0 + minutes[:, None] + np.arange(1, N), rtol=1e-6)


def test_a_relative_file_resolves_from_the_scenario_folder(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "da.csv").write_text(hourly(0, 6))
    in_data = windows(env_for(tmp_path, None, dict(ARCHIVE, file="data/da.csv")))
    next_to = windows(env_for(tmp_path, hourly(0, 6), ARCHIVE))
    np.testing.assert_array_equal(in_data, next_to)


def issued_archive() -> str:
    """Three issues: A the day before (100 + h, 00:00-07:00), B at 00:30 (200 + h, 01:00-02:00,
    so covering [01:00, 03:00)), C at 03:00, after the episode's last decision (900, 00:00-07:00)."""
    rows = [(iso(-12), iso(h), 100.0 + h) for h in range(8)]
    rows += [(iso(0.5), iso(h), 200.0 + h) for h in (1, 2)]
    rows += [(iso(3), iso(h), 900.0) for h in range(8)]
    return "issued_utc,time_utc,price_usd_mwh\n" + "".join(f"{i},{t},{v}\n" for i, t, v in rows)


def test_issued_utc_takes_the_latest_issue_made_at_or_before_the_decision_never_a_later_one(tmp_path):
    seen = windows(env_for(tmp_path, issued_archive(), ARCHIVE))
    half_past = START + timedelta(minutes=30)
    for t, window in zip(decisions(), seen):
        for k in range(1, N):
            target_h = math.floor((t + timedelta(hours=k) - START).total_seconds() / 3600)
            from_b = t >= half_past and 1 <= target_h < 3  # B once issued (at 00:30 itself too), where it covers
            assert window[k] == (200.0 if from_b else 100.0) + target_h, (t, k)
    assert not np.any(seen == 900.0)  # C is issued after every decision: never seen
    assert seen[1, 1] == 101.0 and seen[2, 1] == 201.0  # 00:15 still A (B is future), 00:30 B


def test_the_archive_reader_holds_interpolates_and_refuses_an_uncovered_lead(tmp_path):
    path = tmp_path / "forecast.csv"
    path.write_text(issued_archive())
    archive = read_archive(path, "price_usd_mwh")
    assert len(archive.issued_s) == 3 and archive.has_issues
    at = START + timedelta(hours=1, minutes=30)
    assert archive.leads(at, 4, 1800) == [202.0, 202.0, 103.0]  # 02:00, 02:30 from B; 03:00 past B: A
    linear = read_archive(path, "price_usd_mwh", "linear")
    assert linear.leads(START + timedelta(hours=1), 2, 1800) == [201.5]  # B, halfway from 01:00 to 02:00
    with pytest.raises(ValueError, match=r"no forecast issued at or before 2024-07-14T00:00:00Z covers "
                                         r"2024-07-14T01:00:00Z"):
        archive.leads(START - timedelta(days=1), 2, 3600)


def test_the_archive_is_the_same_for_a_seed_and_for_every_seed(tmp_path):
    first = windows(env_for(tmp_path, issued_archive(), ARCHIVE), seed=3)
    again = windows(env_for(tmp_path, None, ARCHIVE), seed=3)
    other = windows(env_for(tmp_path, None, ARCHIVE), seed=4)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, other)  # no noise: the seed does not enter the archive


PREFIX = "agent.forecasts[0].error"


@pytest.mark.parametrize(("csv", "error", "expected"), [
    (None, dict(ARCHIVE, file="nowhere.csv"),
     f"{PREFIX}.file = 'nowhere.csv': data file not found: "),
    (hourly(0, 6), dict(ARCHIVE, column="ci_g_kwh"),
     f"{PREFIX}.column = 'ci_g_kwh': forecast.csv has no column 'ci_g_kwh'; columns: time_utc, price_usd_mwh "
     "(the file needs time_utc and the forecast column, in the signal's unit)"),
    (hourly(0, 6).replace("time_utc", "time"), ARCHIVE,
     f"{PREFIX}.file = 'forecast.csv': forecast.csv has no column 'time_utc'"),
    (hourly(0, 6).replace(f"{iso(1)},501.0\n{iso(2)},502.0", f"{iso(2)},502.0\n{iso(1)},501.0"), ARCHIVE,
     f"{PREFIX}.file = 'forecast.csv': forecast.csv: data row 3 (time_utc 2024-07-15T01:00:00Z) does not follow "
     "data row 2 (time_utc 2024-07-15T02:00:00Z); sort the file by time_utc and drop duplicates"),
    (hourly(0, 6) + f"{iso(6)},506.0\n", ARCHIVE, "data row 8 (time_utc 2024-07-15T06:00:00Z) does not follow"),
    (issued_archive().replace(f"{iso(3)},{iso(0)}", f"{iso(-13)},{iso(0)}"), ARCHIVE,
     f"{PREFIX}.file = 'forecast.csv': forecast.csv: data row 11 (issued_utc 2024-07-14T11:00:00Z, "
     "time_utc 2024-07-15T00:00:00Z) does not follow data row 10 (issued_utc 2024-07-15T00:30:00Z, "
     "time_utc 2024-07-15T02:00:00Z); sort the file by issued_utc, then time_utc"),
    (hourly(0, 6).replace(f"{iso(3)}", "2024-07-15T05:00:00+02:00"), ARCHIVE,
     f"{PREFIX}.file = 'forecast.csv': forecast.csv: time_utc '2024-07-15T05:00:00+02:00' in data row 4 is not "
     "marked UTC; give UTC times ending in Z or +00:00, e.g. 2024-07-15T13:00:00Z"),
    (hourly(0, 6).replace(f"{iso(3)}", "2024-07-15T03:00:00"), ARCHIVE,
     "time_utc '2024-07-15T03:00:00' in data row 4 is not marked UTC"),
    (hourly(0, 6).replace(f"{iso(3)}", "15/07/2024 03:00"), ARCHIVE,
     "time_utc '15/07/2024 03:00' in data row 4 is not an ISO 8601 time"),
    (hourly(0, 6).replace("503.0", "n/a"), ARCHIVE,
     f"{PREFIX}.column = 'price_usd_mwh': forecast.csv: price_usd_mwh has no finite number in data row 4 ('n/a'); "
     "give a value in the signal's unit in every row"),
    (hourly(0, 4), ARCHIVE,
     f"{PREFIX}.file = 'forecast.csv': forecast.csv covers 2024-07-15T00:00:00Z to 2024-07-15T05:00:00Z, but the "
     "decision at 2024-07-15T02:00:00Z needs 2024-07-15T05:00:00Z (lead 3); the episodes (the scenario's start, "
     "start_window and eval_starts days) decide from 2024-07-15T00:00:00Z to 2024-07-15T02:00:00Z, each needing "
     "leads 1 to 3 × 3600 s: extend the file, or shorten n, step_s or the episodes"),
    (issued_archive().replace(iso(-12), iso(0.25)), ARCHIVE,
     f"{PREFIX}.file = 'forecast.csv': no forecast in forecast.csv issued at or before 2024-07-15T00:00:00Z covers "
     "2024-07-15T01:00:00Z (lead 1);"),
    (hourly(0, 6), {"model": "archive", "column": "price_usd_mwh"},
     f"{PREFIX}.file: required by the archive model: the CSV or Parquet of issued forecasts, relative to the "
     "scenario file"),
    (hourly(0, 6), dict(ARCHIVE, interpolation="cubic"),
     f"{PREFIX}.interpolation = 'cubic': give \"hold\""),
    (hourly(0, 6), dict(ARCHIVE, seed_offset=1),
     f"{PREFIX}.seed_offset = 1: not a key of the 'archive' error model, which takes model, file, column, "
     "interpolation"),
])
def test_a_wrong_archive_is_one_problem_naming_its_key_value_and_fix(tmp_path, csv, error, expected):
    with pytest.raises(ScenarioError) as raised:
        env_for(tmp_path, csv, error)
    text = str(raised.value)
    assert "archive.toml: 1 problem:" in text and expected in text, text


def test_the_archive_must_cover_every_start_day_the_env_draws(tmp_path):
    with pytest.raises(ScenarioError) as raised:
        env_for(tmp_path, hourly(0, 6), ARCHIVE, start_window=["2024-07-15", "2024-07-16"])
    text = str(raised.value)
    assert "1 problem:" in text and "but the decision at 2024-07-16T00:00:00Z needs 2024-07-16T01:00:00Z" in text
    two_days = hourly(0, 6) + "".join(f"{iso(h, 16)},{600.0 + h}\n" for h in range(7))
    env = env_for(tmp_path, two_days, ARCHIVE, start_window=["2024-07-15", "2024-07-16"])
    obs, _ = env.reset(seed=0, options={"start": "2024-07-16"})
    assert obs[-N + 1:].tolist() == [601.0, 602.0, 603.0]
    env.close()


def test_cosim_validate_reads_the_archive_of_an_agent_section(tmp_path, capsys):
    (tmp_path / "forecast.csv").write_text(hourly(0, 4))  # too short for the last decision's leads
    forecast = ('forecasts = [{ signal = "price.price_usd_mwh", n = 4, step_s = 3600, error = { model = "archive", '
                'file = "forecast.csv", column = "price_usd_mwh" } }]\n')
    path = tmp_path / "validate.toml"
    path.write_text(SCENARIO + forecast)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "agent.forecasts[0].error.file = 'forecast.csv': forecast.csv covers" in err and "Traceback" not in err
    (tmp_path / "forecast.csv").write_text(hourly(0, 6))
    assert main(["validate", str(path)]) == 0
