"""The scale map (issue 11): scales sorted smallest first, a reading's status checked, and the
command's bad input in one line (on the test-only toy study, which declares no claims). Each
study's claims read over synthetic labs: tests/studies/<study>/test_*_scale_map.py."""

from __future__ import annotations

import pytest

from rulelab.report.scale_map import open_scales, read_claims, scale_key


def read(st, root) -> dict:
    claims = read_claims(st, open_scales(st, root))
    return {claim.name: (claim, reading) for claim, reading in claims}


def test_scales_sort_smallest_first_with_named_variants_after_their_base():
    names = ["paper", "medium-s5s6", "quick", "variants", "medium", "tiny", "ladder-16k",
             "ladder-2k", "ladder-4k"]
    assert sorted(names, key=scale_key) == ["tiny", "quick", "medium", "medium-s5s6",
                                           "ladder-2k", "ladder-4k", "ladder-16k", "paper",
                                           "variants"]


def test_a_reading_status_must_be_one_of_the_known_ones():
    from rulelab.report.scale_map import ScaleReading

    with pytest.raises(ValueError, match="status"):
        ScaleReading("maybe", "x")


# --- the command: `rulelab scale-map STUDY` -----------------------------------------------------
def cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    from rulelab.cli import main

    monkeypatch.setattr("sys.argv", ["rulelab", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.usefixtures("toy")
@pytest.mark.parametrize("args, message", [
    (["nope"], "no study 'nope'"),
    (["toy"], "declares no claims to map"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, message):
    code, _, err = cli(monkeypatch, capsys, "scale-map", *args, "--labs", tmp_path)
    assert code == 2 and message in " ".join(err.split()) and err.count("error:") == 1
    assert not list(tmp_path.glob("*.html"))
