"""Shared fixtures: toy adapters for the core tests, the --update-golden switch, and the C parts required under
``COSIM_REQUIRE_C_PARTS`` (``make test``: their tests fail instead of skipping, and a library not used warns as an
error)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "helpers"))

from c_part_marks import MISSING, REQUIRED  # noqa: E402

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


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MISSING}(library): a C part this test needs is not in use "
                            "(tests/helpers/c_part_marks.py)")
    if REQUIRED:  # a library not used warns (cosim.sdk.load_library): under make test that is an error
        config.addinivalue_line("filterwarnings", "error::cosim.sdk.CPartWarning")


def pytest_runtest_setup(item):
    missing = item.get_closest_marker(MISSING)
    if missing is not None:
        pytest.fail(f"{missing.args[0]} is not built or not in use, and COSIM_REQUIRE_C_PARTS is set "
                    "(make test builds every C part): run make build", pytrace=False)


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
