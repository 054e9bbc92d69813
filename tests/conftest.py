"""Shared fixtures: toy adapters for the core tests, the --update-golden switch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "helpers"))

from cosim import registry  # noqa: E402

TOYS = {"toy_ramp": "toy_sims:RampSim", "toy_sink": "toy_sims:SinkSim", "toy_faulty": "toy_sims:FaultySim",
        "toy_hint": "toy_sims:HintSim", "toy_noise": "toy_sims:NoiseSim", "toy_slow": "toy_sims:SlowStartSim",
        "toy_ending": "toy_sims:EndingSim", "toy_warn": "toy_sims:WarningSim",
        "toy_kill_self": "toy_sims:KillSelfSim", "toy_faulty_sink": "toy_sims:FaultySinkSim",
        "toy_stall": "toy_sims:StallSim", "toy_odd_output": "toy_sims:OddOutputSim",
        "toy_alias": "toy_sims:AliasRampSim", "toy_slow_steps": "toy_sims:SlowRampSim",
        "toy_finalize_fail": "toy_sims:FinalizeFailSim", "toy_kill_at_finalize": "toy_sims:KillAtFinalizeSim",
        "toy_init_fail": "toy_sims:InitFailSim", "toy_follow": "toy_sims:FollowSim"}


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ from this run")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def toy_adapters():
    """Register the toy adapters for one test."""
    for name, target in TOYS.items():
        registry.register(name, target)
    yield TOYS
    for name in TOYS:
        registry.unregister(name)


@pytest.fixture
def write_scenario(tmp_path):
    """Write a scenario TOML text into tmp_path and return its path."""

    def write(text: str, name: str = "scenario.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
