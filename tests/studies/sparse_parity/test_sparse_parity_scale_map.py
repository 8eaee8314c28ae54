"""Sparse parity declares no claims: ``rulelab scale-map sparse-parity`` says so in one line and
exits 2 (issue 11). The generic map: tests/report/test_scale_map.py."""

from tests.report.test_scale_map import cli


def test_a_study_without_claims_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    code, _, err = cli(monkeypatch, capsys, "scale-map", "sparse-parity", "--labs", tmp_path)
    assert code == 2 and "declares no claims to map" in " ".join(err.split())
    assert err.count("error:") == 1 and not list(tmp_path.glob("*.html"))
