"""The manual builds with no broken links, and the README stays short and points at it (issue 30).

``make docs`` runs ``docs/gen_reference.py`` then ``mkdocs build --strict``; strict mode (with
``validation`` in ``mkdocs.yml`` set to warn) turns a link to a missing page or anchor into a failure.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")
README_MAX_LINES = 250
#: Markdown links and images ``[text](target)``; targets with a scheme or a bare anchor are not files.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _build(docs: Path, site: Path) -> subprocess.CompletedProcess:
    """Generate the reference pages into ``docs`` and build it strictly into ``site``."""
    gen = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--out", str(docs)],
                         capture_output=True, text=True, cwd=ROOT)
    assert gen.returncode == 0, gen.stderr
    config = docs.parent / "mkdocs.yml"
    return subprocess.run([str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, cwd=docs.parent,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(MKDOCS.parent) + ":/usr/bin:/bin"})


@pytest.fixture(scope="module")
def docs_copy(tmp_path_factory) -> Path:
    """A copy of docs/ and mkdocs.yml, so the test writes nothing into the working tree."""
    if not MKDOCS.exists():
        pytest.fail(f"{MKDOCS} is missing: pip install -e '.[docs]'")
    root = tmp_path_factory.mktemp("manual")
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_docs_build_strict(docs_copy):
    result = _build(docs_copy / "docs", docs_copy / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    site = docs_copy / "site"
    for page in ("index.html", "getting-started.html", "reference/scenario.html", "reference/adapters.html",
                 "performance.html", "changelog.html", "tutorials/planner-hosting.html",
                 "tutorials/interconnection.html", "tutorials/operator-dr-cooling.html",
                 "tutorials/researcher-gym.html"):
        assert (site / page).is_file(), page
    adapters = (docs_copy / "docs" / "reference" / "adapters.md").read_text()
    assert "## `datacenter`" in adapters and "`p_cap_w`" in adapters  # generated from the registry
    scenario = (docs_copy / "docs" / "reference" / "scenario.md").read_text()
    assert "`duration_s`" in scenario and "`stall_timeout_s`" in scenario  # generated from the schema
    assert "fonts.googleapis" not in (site / "index.html").read_text()  # nothing fetched by the pages


def test_docs_build_fails_on_a_broken_link(docs_copy):
    """The build above can fail: the same docs with one link to a missing page do not build."""
    page = docs_copy / "docs" / "index.md"
    text = page.read_text()
    page.write_text(text + "\n[missing](no-such-page.md)\n")
    try:
        result = _build(docs_copy / "docs", docs_copy / "site-broken")
    finally:
        page.write_text(text)
    assert result.returncode != 0
    assert "no-such-page.md" in result.stdout + result.stderr


def test_readme_is_short_and_links_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "make docs" in text and "(docs/index.md)" in text
    assert "make run" in text and "make test" in text
    assert not re.search(r"\bround \d", text, re.I), "history belongs in CHANGELOG.md"


def readme_links(text: str) -> list[str]:
    """Relative link targets of README.md (no URLs, no bare anchors), without their #anchor."""
    targets = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_readme_links_point_to_files():
    text = (ROOT / "README.md").read_text()
    targets = readme_links(text)
    assert targets, "README.md has no relative links"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_readme_link_check_can_fail():
    assert readme_links("[a](docs/nope.md#x) [b](https://x.org) [c](#top)") == ["docs/nope.md"]
    assert not (ROOT / "docs/nope.md").exists()
