"""Write tests/scenarios/golden_short.toml: scenarios/default.toml cut to the two hours
around local solar noon (16:00–18:00 UTC in North Carolina), so PV is exercised too.

Run after changing the default scenario, then refresh the golden result and review it:

    .venv/bin/python tests/scenarios/derive_golden_short.py
    .venv/bin/python -m pytest tests/test_golden.py --update-golden
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[1] / "scenarios" / "default.toml"


def derive(text: str) -> str:
    body = text[text.index("[scenario]"):]  # drop the study's header comment
    body = body.replace('"data/', '"../../scenarios/data/')
    body = re.sub(r'(?m)^name = "default"', 'name = "golden_short"', body)
    body = re.sub(r"(?m)^description = .*$", 'description = "the default study cut to two hours (golden test)"', body)
    body = re.sub(r"(?m)^duration_s = [\d_]+", "duration_s = 7_200", body)
    body = re.sub(r"(?m)^start = (\d{4}-\d\d-\d\d)T00:00:00Z", r"start = \1T16:00:00Z", body)
    return ("# Golden scenario: scenarios/default.toml cut to 16:00-18:00 UTC; written by derive_golden_short.py.\n"
            "# tests/test_golden.py compares its run with tests/golden/golden_short.csv.\n\n" + body)


if __name__ == "__main__":
    (HERE / "golden_short.toml").write_text(derive(DEFAULT.read_text()))
