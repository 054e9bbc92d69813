"""Evaluation (cosim/gym/evaluate.py): baselines and a policy through one code path, same days."""

from __future__ import annotations

from pathlib import Path

import pytest

from cosim.errors import ScenarioError
from cosim.gym.evaluate import columns_of, evaluate, main, table

VOLTAGE = Path(__file__).resolve().parents[2] / "scenarios" / "rl_voltage.toml"
SHORT = {"scenario.duration_s": 3600}


def test_baselines_and_a_policy_meet_the_same_days():
    policies = {"do_nothing": "do_nothing", "rule": "rule", "capped": lambda obs: [200.0, 32.0]}
    results = evaluate(VOLTAGE, policies, days=["2024-08-05", "2024-08-06"], seed=3, overrides=SHORT)
    assert [r.policy for r in results] == ["do_nothing", "rule", "capped"]
    assert all(r.days == ["2024-08-05", "2024-08-06"] for r in results)
    nothing, rule, capped = results
    assert capped.mean("n_tokens") < nothing.mean("n_tokens")  # the cap costs throughput
    assert rule.terms != nothing.terms  # voltage_aware acted
    assert nothing.returns[0] != nothing.returns[1]  # two days, two seeds
    text = table(results, columns_of(VOLTAGE, ["slo_loss_h", "import_peak_mw"], SHORT))
    assert text.splitlines()[0].split() == ["policy", "return", "voltage_violation_pu_s", "n_tokens", "slo_loss_h",
                                            "delay_gpu_h", "import_peak_mw"]  # weighted terms, then the extra
    assert f"{capped.mean('return'):.6g}" in text.splitlines()[3]


def test_the_random_baseline_is_seeded_per_day():
    days = ["2024-08-05"]
    first, again = (evaluate(VOLTAGE, {"random": "random"}, days=days, seed=3, overrides=SHORT)[0] for _ in range(2))
    other = evaluate(VOLTAGE, {"random": "random"}, days=days, seed=4, overrides=SHORT)[0]
    nothing = evaluate(VOLTAGE, {"do_nothing": "do_nothing"}, days=days, seed=3, overrides=SHORT)[0]
    assert first.terms == again.terms and first.returns == again.returns
    assert first.terms[0]["delay_gpu_h"] != nothing.terms[0]["delay_gpu_h"]  # it acted
    assert other.terms != first.terms


def test_an_unknown_baseline_is_refused():
    with pytest.raises(ScenarioError, match="policies.best = 'oracle': unknown baseline"):
        evaluate(VOLTAGE, {"best": "oracle"}, overrides=SHORT)


def test_the_command_prints_the_table_on_the_sections_days(capsys):
    assert main([str(VOLTAGE), "--days", "2024-08-05", "--set", "scenario.duration_s=1800"]) == 0
    out = capsys.readouterr().out
    assert "1 held-out days (2024-08-05)" in out and "do_nothing" in out and "rule" in out and "random" in out


def test_the_command_refuses_an_unknown_term_and_no_baseline_before_running(capsys):
    """``--terms nope`` printed a column of NaN after every episode had run, exit 0; ``--baselines ,``
    ended in an IndexError traceback."""
    assert main([str(VOLTAGE), "--terms", "slo_loss_h,nope", "--set", "scenario.duration_s=1800"]) == 1
    err = capsys.readouterr().err
    assert "--terms = 'nope': not a reward term of this scenario; terms: " in err and "slo_loss_h" in err
    assert main([str(VOLTAGE), "--baselines", ",", "--set", "scenario.duration_s=1800"]) == 1
    assert "policies = {}: give at least one" in capsys.readouterr().err
