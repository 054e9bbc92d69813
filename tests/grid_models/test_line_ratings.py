"""Line ratings: every catalogue network carries its conductors' ampacities or says it has none.

Issue 31, case 1: a network whose lines carry placeholder ratings (pandapower's ``case33bw``,
99,999 kA) or none of their file's (an OpenDSS feeder without ``normamps``: OpenDSS rates
every line at 400 A) gives loading KPIs and hosting-capacity thermal limits that measure a
default, not a conductor. Validation warns about both; here every catalogue network is checked,
and the OpenDSS detection is checked on each way a ``.dss`` file can (not) rate a line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cosim
from cosim import grid_models
from cosim.adapters.grid.backend import opendss_circuit_info
from cosim.adapters.grid import default_rating_warnings, placeholder_rating_warnings

#: Catalogue networks whose source publishes no ratings, with the reason (validation warns).
PUBLISHED_WITHOUT_RATINGS = {
    # Baran & Wu 1989 give impedances and loads only; the feeder takes network_params.max_i_ka.
    "ieee33": "32 of 32 lines",
}

PANDAPOWER_NETWORKS = sorted(set(grid_models.catalogue()) - set(grid_models.dss_feeders()) - {"simbench"})


@pytest.mark.parametrize("name", PANDAPOWER_NETWORKS)
def test_every_pandapower_catalogue_network_is_rated_or_known_to_be_unrated(name):
    warned = placeholder_rating_warnings(grid_models.load_network(name), name)
    if name in PUBLISHED_WITHOUT_RATINGS:
        assert len(warned) == 1 and PUBLISHED_WITHOUT_RATINGS[name] in warned[0]
    else:
        assert warned == [], f"{name}: give its lines their published max_i_ka"


#: OpenDSS catalogue feeders whose source gives some lines no ampacity: name -> how many lines
#: (validation warns). The IEEE 8500-node feeder as distributed with OpenDSS: its 66 overhead
#: line codes (LineCodes2.dss) carry no normamps; its cable and triplex codes do.
DSS_PUBLISHED_WITHOUT_RATINGS = {"ieee8500": 2370}


@pytest.mark.parametrize("name", sorted(grid_models.dss_feeders()))
def test_every_opendss_catalogue_feeder_rates_every_line(name):
    info = opendss_circuit_info(grid_models.dss_file(name))
    assert info.lines, name
    if name in DSS_PUBLISHED_WITHOUT_RATINGS:
        assert len(info.unrated_lines) == DSS_PUBLISHED_WITHOUT_RATINGS[name]
        (text,) = default_rating_warnings(info, name)
        assert text.startswith(f"warning: {len(info.unrated_lines)} of {len(info.lines)} lines of {name}")
    else:
        assert info.unrated_lines == (), f"{name}: add normamps from the conductor data to {info.unrated_lines}"


FEEDER = """Clear
New Circuit.t basekv=12.47 bus1=src pu=1.0 phases=3
New WireData.acsr336 GMR=0.0255 DIAM=0.721 RAC=0.306 NormAmps=530 Runits=mi radunits=in gmrunits=ft
New WireData.acsr4 GMR=0.00452 DIAM=0.257 RAC=2.55 Runits=mi radunits=in gmrunits=ft
New LineGeometry.rated nconds=3 nphases=3
~ cond=1 wire=acsr336 x=-4 h=28 units=ft
~ cond=2 wire=acsr336 x=-1.5 h=28 units=ft
~ cond=3 wire=acsr336 x=3 h=28 units=ft
New LineGeometry.bare nconds=3 nphases=3
~ cond=1 wire=acsr4 x=-4 h=28 units=ft
~ cond=2 wire=acsr4 x=-1.5 h=28 units=ft
~ cond=3 wire=acsr4 x=3 h=28 units=ft
New LineCode.rated nphases=3 r1=0.3 x1=0.6 units=mi normamps=340
New LineCode.bare nphases=3 r1=0.3 x1=0.6 units=mi
New Line.geo_rated bus1=src bus2=b1 geometry=rated length=1 units=mi
New Line.geo_bare bus1=b1 bus2=b2 geometry=bare length=1 units=mi
New Line.code_rated bus1=b2 bus2=b3 linecode=rated length=1 units=mi
New Line.code_bare bus1=b3 bus2=b4 linecode=bare length=1 units=mi
New Line.code_bare_own bus1=b4 bus2=b5 linecode=bare length=1 units=mi normamps=250
New Line.own bus1=b5 bus2=b6 r1=0.1 x1=0.1 length=1 units=mi normamps=300
New Line.none bus1=b6 bus2=b7 r1=0.1 x1=0.1 length=1 units=mi
New Line.sw bus1=b7 bus2=b8 switch=yes
New Load.l bus1=b8 kw=100 kv=12.47
"""


def test_opendss_lines_without_an_ampacity_of_the_files_are_found_each_way(tmp_path):
    path = tmp_path / "feeder.dss"
    path.write_text(FEEDER)
    info = opendss_circuit_info(path)
    # a code or geometry without normamps, a bare line; not: a rated code, wire or line, a switch
    assert set(info.unrated_lines) == {"geo_bare", "code_bare", "none"}
    (text,) = default_rating_warnings(info, "feeder.dss")
    assert text.startswith("warning: 3 of 8 lines of feeder.dss") and "normamps" in text
    path.write_text(FEEDER.replace("nphases=3 r1=0.3 x1=0.6 units=mi\n", "nphases=3 r1=0.3 x1=0.6 units=mi normamps=200\n")
                    .replace("RAC=2.55", "RAC=2.55 NormAmps=140").replace("x1=0.1 length=1 units=mi\n",
                                                                        "x1=0.1 length=1 units=mi normamps=90\n"))
    assert default_rating_warnings(opendss_circuit_info(path), "feeder.dss") == []


def test_a_user_feeder_without_ratings_is_warned_at_validation(tmp_path):
    """OpenG2G's IEEE 13 as shipped before 2026-12-05 (no normamps): ``cosim validate`` names it."""
    text = (Path(grid_models.__file__).parent / "openg2g_ieee13.dss").read_text()
    stripped = "\n".join(line.split(" normamps=")[0] if line.startswith("New LineCode") else line
                         for line in text.splitlines())
    assert stripped != text
    (tmp_path / "feeder.dss").write_text(stripped)
    (tmp_path / "s.toml").write_text(
        '[scenario]\nname = "t"\nstart = 2024-07-15T00:00:00Z\nduration_s = 60\nstep_s = 60\n'
        '[sims.grid]\nadapter = "grid"\nengine = "opendss"\nnetwork = "feeder.dss"\n'
        '[entities.feeder]\nsim = "grid"\nmodel = "Grid"\n')
    warned = [w for w in cosim.load_scenario(tmp_path / "s.toml").warnings if "ampacity" in w]
    assert len(warned) == 1 and "11 of 12 lines of " in warned[0] and "feeder.dss (650632" in warned[0], warned


def _json_scenario(tmp_path: Path, ratings: dict[int, float]) -> Path:
    import pandapower as pp

    net = grid_models.load_network("ieee33", max_i_ka=0.4)
    for index, value in ratings.items():
        net.line.loc[index, "max_i_ka"] = value
    pp.to_json(net, str(tmp_path / "feeder.json"))
    path = tmp_path / "s.toml"
    path.write_text('[scenario]\nname = "t"\nstart = 2024-07-15T00:00:00Z\nduration_s = 60\nstep_s = 60\n'
                    '[sims.grid]\nadapter = "grid"\nnetwork = "feeder.json"\n'
                    '[entities.feeder]\nsim = "grid"\nmodel = "Grid"\n')
    return path


def test_a_user_network_with_lines_without_a_rating_is_warned(tmp_path):
    """A NaN ``max_i_ka`` gives a NaN loading, which no overload KPI or hosting limit catches."""
    import math

    warned = cosim.load_scenario(_json_scenario(tmp_path, {3: math.nan, 7: math.nan})).warnings
    (text,) = [w for w in warned if "no rating" in w]
    assert "2 of 32 lines of" in text and "line 4_5, 8_9" in text
    assert cosim.load_scenario(_json_scenario(tmp_path, {})).warnings == []


def test_a_user_network_with_a_zero_rating_is_refused_naming_the_line(tmp_path):
    """A rating of 0 kA makes every step an infinite overload: one problem, not a run."""
    with pytest.raises(cosim.ScenarioError) as caught:
        cosim.load_scenario(_json_scenario(tmp_path, {4: 0.0}))
    text = str(caught.value)
    assert "feeder.json" in text and "max_i_ka <= 0: line 5_6" in text and "ratings in kA" in text
