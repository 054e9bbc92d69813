"""``cosim serve``'s OpenADR flags on bad input, before anything starts: a ``--vtn`` that is no usable
URL (scheme, host, port), a scenario ``vtn_url`` that is none, and ``--ven-entity`` / ``--ven-name``
without ``--vtn`` (they would do nothing). One problem naming the flag or key, its value and the fix;
exit 1; no traceback; nothing contacted. Without ``--vtn`` a scenario's ``vtn_url`` is only noted."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cosim.cli import main
from cosim.cli import serve as serve_cli
from cosim.live import LiveRun, load_live

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "openadr_live_ven.toml"


@pytest.mark.parametrize("flags, named, fix", [
    (["--vtn", "ftp://vtn.example/x"], "--vtn = 'ftp://vtn.example/x'", "http(s) URL"),
    (["--vtn", "http://:8080/OpenADR2/Simple/2.0b"], "--vtn = 'http://:8080", "no host in the URL"),
    (["--vtn", "http://127.0.0.1:99999/x"], "--vtn = 'http://127.0.0.1:99999/x'", "port is not a number 0..65535"),
    (["--ven-entity", "events"], "--ven-entity = 'events'", "acts only with --vtn"),
    (["--ven-name", "campus"], "--ven-name = 'campus'", "acts only with --vtn"),
])
def test_a_bad_openadr_flag_is_one_problem_before_anything_starts(tmp_path, capsys, flags, named, fix):
    code = main(["serve", str(SCENARIO), "--port", "0", "--out", str(tmp_path), "--no-report", *flags])
    err = capsys.readouterr().err
    assert code == 1 and "openadr_live_ven.toml: 1 problem" in err and named in err and fix in err, err
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())  # no run folder: nothing was started


def test_a_scenario_vtn_url_without_a_host_is_named_by_its_key(tmp_path, capsys):
    code = main(["serve", str(SCENARIO), "--port", "0", "--out", str(tmp_path), "--no-report",
                 "--set", "entities.events.vtn_url=http://:1/OpenADR2/Simple/2.0b", "--vtn"])
    err = capsys.readouterr().err
    assert code == 1 and "entities.events.vtn_url = 'http://:1/" in err and "no host in the URL" in err, err
    assert "Traceback" not in err


def test_without_vtn_the_scenario_vtn_url_is_noted_and_not_joined(tmp_path, capsys):
    scn = load_live(SCENARIO, {"scenario.duration_s": 600}, 0.0004)
    run = LiveRun(scn, tmp_path / "runs", report=False)
    try:
        args = argparse.Namespace(vtn=None, ven_entity=None, ven_name=None, scenario=str(SCENARIO))
        assert serve_cli._join_vtn(args, run) is None
        assert run.ven is None and not run.step_hooks
    finally:
        run.stop()
    out = capsys.readouterr().out
    assert "note: entities.events.vtn_url is set; the run joins it only with --vtn" in out
