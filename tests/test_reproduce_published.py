"""Every published case (scenarios/published/) reproduces in its quick form: a change that breaks a
published result fails here. ``cosim reproduce`` (full runs) gives the README's table.

The quick runs use the direct engine (identical results to mosaik, tests/run/test_engines_equal.py;
faster to start). A case that does not reproduce even in its full form is listed in
:data:`KNOWN_FAILING` with the reason (the README table states it): those must still run and
fail the same way, so a fix shows up as a change here too. Figures computed only by the full runs
(:data:`KNOWN_FAILING_FULL` names the failing ones) are not checked here: ``cosim reproduce`` by hand.
"""

from __future__ import annotations

import pytest

from cosim.studies.reproduce import case_files, load_cases, run_cases

CASES = [p.stem for p in case_files()]
#: case -> figures that do not reproduce (quick form), and why (README "Published results").
_DUKE = ("one year (2022) of EIA-930 net generation stands in for nine years (2016-2024) of demand: the "
         "thresholds are that year's own peaks and the years of lower load are absent (duke_headroom.toml header)")
KNOWN_FAILING: dict[str, dict[str, str]] = {
    "duke_headroom": {name: _DUKE for name in (
        *(f"{ba} headroom at 0.5 %" for ba in ("PJM", "MISO", "ERCOT", "CAISO", "NYISO", "SOCO", "BPA", "AZPS")),
        *(f"sum of the 8 authorities at {limit} %" for limit in ("0.25", "0.5", "1")))},
    "mlenergy_curves": {  # a smooth fit in ln(batch) against measured rows (mlenergy_curves.toml header)
        "Llama 3.1 8B Instruct, B200 x 1: GPU power vs batch, mean error over 9 batch sizes":
            "the measured power is not monotone in the batch (617 / 449 / 540 W at 64 / 128 / 256)",
        "Llama 3.1 8B Instruct, B200 x 1: energy per output token, mean error": "the same rows",
        "Llama 3.1 70B Instruct, H100 x 4: energy per output token, mean error": "power and throughput errors add (2.3 %)",
        "Llama 3.1 70B Instruct, B200 x 2: energy per output token, mean error": "power and throughput errors add (2.6 %)",
    },
}

#: case -> figures that need the full run (``quick = false``) and do not reproduce there, and why
#: (README "Published results"; measured with ``cosim reproduce NAME``). The quick form cannot
#: check them, so they are listed here and the test below checks that each is a full-run figure.
_G2G_TPUT = ("our OFO cuts ~0.5 MW during training (every fleet to batch 8) where OpenG2G's cuts a few hundred kW: "
             "our baseline violation is deeper (45.9 vs 31.3 pu*s), and our Qwen3-235B stand-in (Qwen3-30B-A3B "
             "on 1,680 single-GPU replicas) serves ~15x the tokens per GPU; with the Qwen fleets at their GPU power "
             "the loss is 4.6 %; the same batch trajectories on OpenG2G's fits gain 3.0 %, because there the "
             "8B and Qwen fleets gain at batch 512 outside the window and ours stop at 88 (openg2g_ieee13.toml header)")
KNOWN_FAILING_FULL: dict[str, dict[str, str]] = {
    "openg2g_ieee13": {
        "OFO (their parameters): all-bus violation time":
            "121 s vs 69.2 s: the same deeper training-window violation (~95 kW more GPU power from the Qwen "
            "stand-ins); rho_v = 5 (their tuning note) gives 59 s",
        "OFO (their parameters): throughput loss vs baseline": _G2G_TPUT,
        "OFO, rho_v = 5: throughput loss vs baseline": _G2G_TPUT,
    },
}


def test_full_run_failures_are_full_run_figures_of_their_case():
    cases = {c.name: c for c in load_cases()}
    for name, figures in KNOWN_FAILING_FULL.items():
        full_only = {f.name for f in cases[name].figures if not f.quick}
        assert set(figures) <= full_only, set(figures) - full_only


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cases = load_cases()
    out = tmp_path_factory.mktemp("reproduce")
    return {r.name: r for r in run_cases(cases, out, quick=True, extra={"scenario.engine": "direct"}, progress=None)}


def test_there_are_published_cases():
    assert {"polca", "emerald_phoenix", "emerald_london", "carbon_aware", "carbon_responder", "dr_event",
            "duke_headroom", "mlenergy_curves", "openg2g_ieee13"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_published_case_reproduces_in_its_quick_form(results, name):
    res = results[name]
    assert all(r["status"] == "ok" for r in res.runs.values()), res.runs
    failing = {f.name: f.reason for f in res.figures if f.passed is False}
    assert set(failing) == set(KNOWN_FAILING.get(name, {})), failing
