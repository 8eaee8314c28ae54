"""Sparse parity through the generic command line: ``train``, ``runs``, ``report``, ``sweep``
and bad input, with nothing in the engine or the CLI naming the study (issue 9).

Until the registry (:mod:`rulelab.study_registry`) lists ``rulelab.studies.sparse_parity``, the
``registered`` fixture adds it for these tests (and rebuilds the cached command tree); once
the line is there, the fixture changes nothing.
"""

import base64
import io
import json
from html.parser import HTMLParser

import pytest

import rulelab.study_registry as registry
from cli_inproc import run_main

PACKAGE = "rulelab.studies.sparse_parity"
QUICK = "src/rulelab/studies/sparse_parity/recipes/quick.yaml"


def _clear_caches() -> None:
    from rulelab.cli.app import build_app

    for fn in (registry.studies, registry.tasks, build_app):
        fn.cache_clear()


@pytest.fixture
def registered(monkeypatch):
    if PACKAGE not in registry.STUDIES:
        monkeypatch.setattr(registry, "STUDIES", (*registry.STUDIES, PACKAGE))
    _clear_caches()
    yield
    monkeypatch.undo()
    _clear_caches()


TINY = ["--n-bits", "6", "8", "--k", "2", "--width", "32", "--epochs", "300", "--eval-every",
        "10", "--seeds", "2"]


def test_train_runs_report_json_and_the_studys_reproduction(registered, tmp_path, capsys,
                                                            monkeypatch):
    lab = tmp_path / "lab"
    r = run_main(["train", "sparse_parity", *TINY, "--lab", lab], capsys, monkeypatch)
    assert r.returncode == 0, r.stderr
    r = run_main(["runs", "--lab", lab], capsys, monkeypatch)
    assert r.returncode == 0, r.stderr
    assert "learned" in r.stdout and r.stdout.count("(2/2)") == 2
    assert "steps-to-learn ∝ n^a" in r.stdout
    r = run_main(["runs", "--json", "--lab", lab], capsys, monkeypatch)
    runs = json.loads(r.stdout)
    assert len(runs) == 4 and all(x["summary"]["learned"] for x in runs)
    assert {x["config"]["task"] for x in runs} == {"sparse_parity"}
    out = tmp_path / "report.html"
    r = run_main(["report", "--lab", lab, "--out", out], capsys, monkeypatch)
    assert r.returncode == 0, r.stderr
    assert "Steps to learn vs n" in out.read_text(encoding="utf-8")
    reproduce_on(lab, [x["run_id"] for x in runs], tmp_path / "reports" / "sp.html",
                 report=out)


class Page(HTMLParser):
    """What a report page holds: its ``<h2>``/``<h3>`` headings, figure captions, images
    (``src``) and the figures marked as drawn without data (``data-no-data``)."""

    def __init__(self, text: str):
        super().__init__()
        self.headings, self.captions, self.images, self.no_data = [], [], [], []
        self._into = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("h2", "h3"):
            self._into, self._text = self.headings, ""
        elif tag == "figcaption":
            self._into, self._text = self.captions, ""
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "figure" and "data-no-data" in attrs:
            self.no_data.append(attrs["data-no-data"])

    def handle_data(self, data):
        if self._into is not None:
            self._text += data

    def handle_endtag(self, tag):
        if self._into is not None and tag in ("h2", "h3", "figcaption"):
            self._into.append(self._text)
            self._into = None


def decoded(src: str):
    """The embedded PNG as a PIL image (raises if it is not one)."""
    from PIL import Image

    head, data = src.split(",", 1)
    assert head == "data:image/png;base64", head[:40]
    image = Image.open(io.BytesIO(base64.b64decode(data)))
    image.load()
    return image


def reproduce_on(lab, run_ids, out, report) -> None:
    """The study's ``reproduce`` over a trained lab: tables printed, files written, and the
    page ``rulelab report`` draws for the lab (``report``) with the reproduction's sections."""
    from rich.console import Console

    from rulelab.store import Lab
    from rulelab.studies.sparse_parity import STUDY
    from rulelab.study import Reproduction, resolve

    buf = io.StringIO()
    r = Reproduction(study=STUDY, scale="tiny", recipe=None, lab=Lab(lab, create=False),
                     run_ids=tuple(run_ids), out=out, device="cpu",
                     console=Console(file=buf, width=200), train_seconds=1.0)
    assert resolve(STUDY.reproduce)(r) == out
    printed = buf.getvalue()
    assert "100% [34%, 100%] (2/2)" in printed and "steps-to-learn ∝ n^a: a = " in printed
    text = out.read_text(encoding="utf-8")
    page, lab_page = Page(text), Page(report.read_text(encoding="utf-8"))
    # every figure of the lab's report, in its order, and nothing drawn without data
    assert page.captions == lab_page.captions and len(page.images) == len(page.captions) == 4
    for want in ("Steps to learn vs n", "Support mass and Fourier gap",
                 "Accuracy per configuration", "Loss per configuration"):
        assert sum(c.startswith(want) for c in page.captions) == 1, (want, page.captions)
    assert not page.no_data, page.no_data
    for src, caption in zip(page.images, page.captions, strict=True):
        image = decoded(src)
        assert image.width > 300 and image.height > 200, caption
        colours = image.convert("RGB").resize((64, 64)).getcolors(64 * 64)
        assert len(colours) > 8, f"blank figure: {caption}"
    # results first (issue 23): what the lab shows, the figures, then the reproduction's own
    assert page.headings == [*lab_page.headings, "Wall time"]
    assert lab_page.headings[:2] == ["What this lab shows", "Figures"]
    assert "Sparse parity: hidden progress — tiny reproduction" in text
    # the steps table once (not beside a rate table of the same cells): a row per n
    results, _ = text.split("<h2>Figures</h2>")
    assert text.count("<td>100% [34%, 100%] (2/2)</td>") == 2 == results.count(
        "<td>100% [34%, 100%] (2/2)</td>")
    assert text.count("steps-to-learn ∝ n^a: a = ") == 1
    assert "hidden progress before visible progress in " in results
    files = out.parent / "sp-files"
    for name in ("steps_vs_n.csv", "progress.csv", "steps_vs_n.png", "hidden_progress.png"):
        assert (files / name).stat().st_size > 0, name


@pytest.mark.parametrize("argv, flag", [
    (["--n-bits", "4", "--k", "9"], "--k: 9 is not allowed"),
    (["--model", "transformer", "--width", "8"], "--width: not allowed with --model transformer"),
    (["--samples", "fixed"], "--n-train: required with --samples fixed"),
    (["--loss", "mse"], "--loss"),
])
def test_bad_input_is_one_line_exit_2_and_no_lab(registered, tmp_path, capsys, monkeypatch,
                                                 argv, flag):
    lab = tmp_path / "lab"
    r = run_main(["train", "sparse_parity", *argv, "--epochs", "5", "--lab", lab], capsys,
                 monkeypatch)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    assert flag in lines[0]
    assert not lab.exists()


def test_the_quick_recipe_plans_48_runs(registered, capsys, monkeypatch):
    r = run_main(["sweep", QUICK, "--dry-run"], capsys, monkeypatch)
    assert r.returncode == 0, r.stderr
    assert "sparse-parity-quick" in r.stdout and "48" in r.stdout


def test_export_tl_takes_the_studys_adapter(registered, tmp_path, capsys, monkeypatch):
    """Sparse parity declares its TransformerLens export (issue 22): a transformer run exports
    (2 bit tokens + CLS, 2 logits whose difference is the run's f); an MLP run is refused."""
    pytest.importorskip("transformer_lens")
    import torch

    from rulelab.api.run_model import run_model
    from rulelab.models.tl_export import load_file
    from rulelab.store import Lab

    lab = tmp_path / "lab"
    argv = ["--n-bits", "6", "--k", "2", "--epochs", "20", "--eval-every", "10", "--lab", lab]
    for shape in (["--model", "transformer", "--d-model", "16", "--d-mlp", "16", "--heads", "2"],
                  ["--model", "mlp", "--width", "16"]):
        r = run_main(["train", "sparse_parity", *shape, *argv], capsys, monkeypatch)
        assert r.returncode == 0, r.stderr
    ids = {x["config"]["model"]: x["run_id"] for x in Lab(lab).runs_json()}
    out = tmp_path / "t.pt"
    r = run_main(["export", "tl", ids["transformer"], "--lab", lab, "--out", out], capsys,
                 monkeypatch)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.rsplit("val inputs: ", 1)[1].split()[0]) < 1e-5
    config = torch.load(out, weights_only=True)["config"]
    assert (config["d_vocab"], config["d_vocab_out"], config["n_ctx"]) == (3, 2, 7)
    ours = run_model(Lab(lab), ids["transformer"])
    x = ours.data.eval_x[:64]  # ±1 bits; tokens 0/1 after CLS (id 2)
    tokens = torch.cat([torch.full((64, 1), 2), (x > 0).long()], 1)
    with torch.no_grad():
        z = load_file(out)(tokens)[:, 0]  # [64, 2]
        assert torch.allclose(z[:, 1] - z[:, 0], ours(x), atol=1e-5)
    r = run_main(["export", "tl", ids["mlp"], "--lab", lab], capsys, monkeypatch)
    assert r.returncode == 2 and "EnsembleParityMLP" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
