"""Study-S mechanistic figures (SPEC S.4): gradient dynamics, ablation and patching heatmaps,
fingerprint trajectories, and their section in the HTML report."""

import re

import pandas as pd
import pytest
from matplotlib.figure import Figure

from rulelab.report.html import write_report
from rulelab.studies.shortcut_saturation.figures import (
    ablation_heatmap,
    analysis_figures,
    checkpoints,
    fingerprint_trajectories,
    gradient_dynamics,
    patching_heatmap,
)

EPOCHS = [0, 1, 3, 10, 30, 100]
CONFIGS = [(1, 0.5), (1, 0.9), (2, 0.5), (2, 0.9)]  # (layers, ratio), 2 heads, 3 seeds each
GEN_AT = {"L2-r0.9-s0": 30.0}  # the one seed that generalizes, and when
# adv 100% with val low (the flipped shortcut): adv-only, not generalized — no star (SPEC S.3)
ADV_ONLY_AT = {"L1-r0.5-s1": 10.0, **GEN_AT}


def make_runs() -> pd.DataFrame:
    rows = []
    for layers, ratio in CONFIGS:
        for seed in range(3):
            rid = f"L{layers}-r{ratio}-s{seed}"
            rows.append(dict(run_id=rid, status="done", task="mpsp", layers=layers, heads=2,
                             ratio=ratio,
                             weight_decay=0.1, seed=seed, generalized=rid in GEN_AT,
                             first_epoch_generalized=GEN_AT.get(rid),
                             adv_generalized=rid in ADV_ONLY_AT,
                             first_epoch_adv_100=ADV_ONLY_AT.get(rid), max_adv_acc=0.5))
    return pd.DataFrame(rows)


def _config(runs: pd.DataFrame, rid: str) -> dict:
    return runs.set_index("run_id").loc[rid, ["layers", "heads", "ratio", "weight_decay",
                                              "seed"]].to_dict()


def make_gradients(runs) -> pd.DataFrame:
    """Tracked in training: no config columns (they come from ``runs``)."""
    rows = [dict(run_id=r.run_id, epoch=e, module=m, cos=-0.5 + 0.001 * e,
                 amplification=1 + r.ratio * e / 10, r=r.ratio)
            for r in runs.itertuples() for e in EPOCHS for m in ("all", "embed")]
    return pd.DataFrame(rows)


def make_ablation(runs, epochs=(10, 100)) -> pd.DataFrame:
    rows = []
    for r in runs.itertuples():
        for e in epochs:
            for layer in range(r.layers):
                for comp in ("head0", "head1", "mlp"):
                    for method in ("zero", "mean"):
                        d = -0.1 * (r.seed + 1) if comp == "head0" else 0.02
                        rows.append(dict(run_id=r.run_id, epoch=e, layer=layer, component=comp,
                                         method=method, where="cls", d_adv_acc=d,
                                         d_val_acc=-d, base_adv_acc=0.4, base_val_acc=1.0,
                                         **_config(runs, r.run_id)))
    return pd.DataFrame(rows)


def make_patching(runs, n_pos=4) -> pd.DataFrame:
    rows = []
    for r in runs.itertuples():
        base = dict(run_id=r.run_id, epoch=100, **_config(runs, r.run_id))
        for layer in range(r.layers):
            for pos in range(n_pos):
                rows.append(dict(base, kind="resid_pre", layer=layer, pos=pos, head=-1,
                                 value=0.1 * r.seed))
                rows.append(dict(base, kind="mlp_out", layer=layer, pos=pos, head=-1, value=0.5))
                rows += [dict(base, kind="z", layer=layer, pos=pos, head=h, value=0.2)
                         for h in range(2)]
            rows.append(dict(base, kind="mlp_out_all", layer=layer, pos=-1, head=-1, value=0.9))
            rows += [dict(base, kind="z_all", layer=layer, pos=-1, head=h, value=0.3)
                     for h in range(2)]
    return pd.DataFrame(rows)


def make_fingerprints(runs) -> pd.DataFrame:
    rows = [dict(run_id=r.run_id, epoch=e, layer=layer, head=h, qk_rho=0.1 * h,
                 first_mass=0.2, ov_parity_rho=-0.1 * layer)
            for r in runs.itertuples() for e in EPOCHS for layer in range(r.layers)
            for h in range(2)]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def runs():
    return make_runs()


def test_gradient_dynamics_panels_seed_lines_reference_and_markers(runs):
    fig = gradient_dynamics(make_gradients(runs), runs)
    assert isinstance(fig, Figure) and len(fig.axes) == 4  # (cos, amplification) × (1L, 2L)
    cos_1l, cos_2l, amp_1l, amp_2l = fig.axes
    # Per ratio: 3 seed lines + median; the cos panel adds the zero line, the amplification
    # panel one dashed r/(1−r) line per ratio; 2L r=0.9 seed 0 adds a generalization star.
    assert len(cos_1l.lines) == 2 * 4 + 1 and len(amp_1l.lines) == 2 * 4 + 2
    assert len(cos_2l.lines) == 2 * 4 + 1 + 1 and len(amp_2l.lines) == 2 * 4 + 2 + 1
    stars = [ln for ln in amp_2l.lines if ln.get_marker() == "*"]
    assert [ln.get_xdata()[0] for ln in stars] == [30.0]
    assert stars[0].get_ydata()[0] == pytest.approx(1 + 0.9 * 3)  # on the seed's curve
    dashed = sorted(ln.get_ydata()[0] for ln in amp_1l.lines if ln.get_linestyle() == "--")
    assert dashed == pytest.approx([1.0, 9.0])
    assert amp_1l.get_yscale() == "log" and amp_1l.get_xscale() == "symlog"
    assert "generalized r=0.5: 0/3, r=0.9: 1/3" in cos_2l.get_title()
    # Another module is selectable; an absent one draws nothing.
    assert gradient_dynamics(make_gradients(runs), runs, module="embed") is not None
    assert gradient_dynamics(make_gradients(runs), runs, module="mlp1") is None


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_ablation_heatmap_means_over_seeds_and_checkpoints(runs):
    table = make_ablation(runs)
    fig = ablation_heatmap(table)
    assert isinstance(fig, Figure) and len(fig.axes) == 3  # Δadv, Δval, colorbar
    adv, val, _ = fig.axes
    values = adv.images[0].get_array()
    assert values.shape == (4, 6)  # 4 configs × (L0, L1) · (head0, head1, mlp)
    assert values.mask[0, 3:].all() and not values.mask[2].any()  # 1L has no L1 cells
    assert values[0, 0] == pytest.approx(-20)  # mean of −10, −20, −30 pp over seeds
    assert "-20" in _texts(adv) and "+20" in _texts(val)
    assert "epoch 100" in adv.get_title()
    assert [t.get_text() for t in adv.get_yticklabels()][0].startswith("1L·2H r=0.5 n=3")
    # One row of panels per checkpoint, each at the stored epoch nearest it.
    two = ablation_heatmap(table, [10, 90], runs=runs)
    assert len(two.axes) == 5
    assert "epoch 10, 12 of 12 runs" in two.axes[0].get_title()
    assert "epoch 100 (nearest to 90)" in two.axes[2].get_title()
    assert checkpoints(table) == [10, 100]
    assert checkpoints(pd.DataFrame({"epoch": [0, 1, 2, 3, 5, 7, 10, 20, 50, 100]})) == [
        5, 20, 100]


def test_patching_heatmap_rows_per_architecture(runs):
    fig = patching_heatmap(make_patching(runs))
    assert isinstance(fig, Figure) and len(fig.axes) == 5  # 2 archs × 2 ratios + colorbar
    one, _, two, _ = fig.axes[:4]
    # rows: resid per layer, z per layer·head, mlp per layer; columns: CLS, x1..x3, all.
    assert one.images[0].get_array().shape == (4, 5)
    assert two.images[0].get_array().shape == (8, 5)
    values = one.images[0].get_array()
    assert values[0, 0] == pytest.approx(0.1)  # resid mean over seeds 0, 0.1, 0.2
    assert values[3, 4] == pytest.approx(0.9) and values.mask[0, 4]  # mlp_all; no resid_all
    assert [t.get_text() for t in one.get_yticklabels()] == [
        "resid L0", "z L0.H0", "z L0.H1", "mlp L0"]
    assert one.get_title() == "1L·2H r=0.5 (n=3, epoch 100)"


def test_fingerprint_trajectories_lines_per_head_and_seed(runs):
    fig = fingerprint_trajectories(make_fingerprints(runs), runs)
    assert isinstance(fig, Figure) and len(fig.axes) == 3 * 4  # 3 fingerprints × 4 configs
    # 1L: 2 heads × (3 seeds + median) + the zero line on the QK panel.
    assert len(fig.axes[0].lines) == 2 * 4 + 1
    # 2L r=0.9: 4 heads × (3 seeds + median) + one star per head for the generalized seed.
    last = fig.axes[3]
    assert len(last.lines) == 4 * 4 + 4 + 1
    assert "generalized 1/3" in last.get_title()
    assert len(fingerprint_trajectories(make_fingerprints(runs), runs, max_configs=2).axes) == 6


@pytest.mark.parametrize("fn", [gradient_dynamics, ablation_heatmap, patching_heatmap,
                                fingerprint_trajectories])
def test_empty_or_unrelated_tables_give_none(fn):
    assert fn(pd.DataFrame()) is None
    assert fn(None) is None
    assert fn(pd.DataFrame({"run_id": ["a"], "epoch": [1]})) is None


def test_report_adds_the_mechanistic_section(runs, tmp_path):
    small = runs[(runs["seed"] < 2) & (runs["layers"] == 2)]  # fewer panels: quicker
    metrics = pd.DataFrame([dict(run_id=r, epoch=e, split=s, metric="acc", value=0.5)
                            for r in small["run_id"] for e in (10, 20) for s in ("val", "adv")])
    analyses = {"gradients": make_gradients(small), "ablation": make_ablation(small, (100,)),
                "patching": make_patching(small), "fingerprints": make_fingerprints(small),
                "phases": pd.DataFrame()}
    assert analysis_figures({k: pd.DataFrame() for k in analyses}, small) == []
    assert analysis_figures(None) == []
    text = write_report(tmp_path / "r.html", title="t", runs=small, metrics=metrics,
                        analyses=analyses).read_text()
    before, after = text.split("<h2>Mechanistic analyses</h2>")
    assert len(re.findall("data:image/png;base64,", before)) == 2  # rate and accuracy figures
    assert len(re.findall("data:image/png;base64,", after)) == 4
    assert "QK/OV fingerprints" in after and "Mean-ablation at CLS" in after


def test_ablation_panels_never_pool_epochs(runs):
    """Issue 23: one run ablated at every epoch, every run at the last: the early panels hold
    that run alone (n = 1, its own values), the last every run; never an average of a run at
    epoch 10 with another at epoch 100."""
    table = make_ablation(runs, (100,))
    one = "L1-r0.5-s1"
    early = make_ablation(runs[runs["run_id"] == one], (10, 30))
    early["d_adv_acc"] = early["d_adv_acc"] * 0 + 0.05  # +5 pp at 10 and 30, −20 pp at 100
    table = pd.concat([table, early], ignore_index=True)
    fig = ablation_heatmap(table, [10, 100], runs=runs)
    adv10, _, adv100, _, _ = fig.axes
    assert "epoch 10, 1 of 12 runs" in adv10.get_title()
    assert [t.get_text() for t in adv10.get_yticklabels()] == ["1L·2H r=0.5 n=1, base adv 40%"]
    assert adv10.images[0].get_array()[0, 0] == pytest.approx(5)  # that run alone
    assert "epoch 100, 12 of 12 runs" in adv100.get_title()
    assert adv100.images[0].get_array()[0, 0] == pytest.approx(-20)  # seeds 0–2 at 100 only
    # runs that ended at different epochs: the epoch on every row, rows never pooled
    ended = table[table["epoch"] == 100].copy()
    ended.loc[ended["run_id"] == one, "epoch"] = 60
    last = ablation_heatmap(ended, runs=runs).axes[0]
    labels = [t.get_text() for t in last.get_yticklabels()]
    assert labels[:2] == ["1L·2H r=0.5 epoch 60 n=1, base adv 40%",
                          "1L·2H r=0.5 epoch 100 n=2, base adv 40%"]
    assert last.images[0].get_array()[:2, 0].tolist() == pytest.approx([-20, -20])
