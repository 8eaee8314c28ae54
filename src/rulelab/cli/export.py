"""``rulelab export tl RUN_ID``: one stored run as a TransformerLens model file (issue 10);
``--where`` exports every run it picks (issue 23).

The file holds the TransformerLens config and the weights in HookedTransformer's names
(:func:`rulelab.models.tl_export.export_file`); ``rulelab.models.tl_export.load_file(path)``
rebuilds the model — with TransformerLens ≥ 4 (tested: 4.3.0) a
``TransformerBridge.boot_native`` model, with older versions a ``HookedTransformer``. Before
writing, the command builds that model and checks its logits against the run's own on the
run's validation inputs, and prints the largest difference, then how to load the file.

Everything is checked before the first file is written: the runs (an id, a unique prefix, or
``--where``), ``--epoch`` (a stored weight snapshot of every run; left out: the final
checkpoint), each run being a transformer, and ``--out``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rulelab.cli.analyze import WHERE_HELP
from rulelab.cli.options import LabOpt, check_out, lab_dir, open_lab, print_warnings
from rulelab.errors import UserError

RunIdArg = typer.Argument(None, metavar="RUN_ID", help="the run to export: its id or a unique "
                          "prefix (as shown by `rulelab runs --ids`); or leave it out and give "
                          "--where")
OutOpt = typer.Option(None, "--out", help="the file to write, ending in .pt (default "
                      "RUN_ID-tl.pt in the current folder); with --where, the folder to write "
                      "one RUN_ID-tl.pt per run into")
EpochOpt = typer.Option(None, "--epoch", help="a stored weight-snapshot epoch instead of the "
                        "final checkpoint (leave it out for the final checkpoint)")
WhereOpt = typer.Option(None, "--where", help=WHERE_HELP + "; exports every run it picks")


def tl_cmd(run_id: str | None = RunIdArg, lab: Path | None = LabOpt,
           out: Path | None = OutOpt, epoch: int | None = EpochOpt,
           where_expr: str | None = WhereOpt) -> None:
    """Export a transformer run as a TransformerLens model (needs transformer_lens:
    pip install transformer_lens). TransformerLens ≥ 4: TransformerBridge.boot_native; older:
    HookedTransformer. Feed it the tokens with CLS (id V) first; logits at position 0."""
    from rulelab.api.find_runs import resolve_run, select
    from rulelab.store import StoreError

    if run_id is None and not where_expr:
        raise UserError("RUN_ID: give the run to export (its id or a unique prefix; `rulelab "
                        "runs --ids` lists them) or --where to export every run it picks")
    if run_id is not None and where_expr:
        raise UserError("RUN_ID: give a run or --where, not both")
    if epoch is not None and epoch < 0:
        raise UserError(f"--epoch: {epoch} is not allowed; give a stored snapshot epoch ≥ 0, "
                        "or leave --epoch out for the final checkpoint")
    if out is not None and not where_expr:
        out = check_out("--out", out, ".pt")
    if out is not None and where_expr and (out.suffix == ".pt" or out.is_file()):
        raise UserError(f"--out: {str(out)!r} is not allowed; with --where it names a folder "
                        "(one RUN_ID-tl.pt per run), not a file")
    the_lab = open_lab(lab_dir(lab), create=False)
    try:
        if where_expr:
            ids = list(select(the_lab, where_expr)["run_id"])
        else:
            ids = [resolve_run(run_id, [r["run_id"] for r in the_lab.runs_json()],
                               the_lab.root, what="RUN_ID")]
        check_epoch(the_lab, ids, epoch)
        folder = out if where_expr else None
        outs = {r: (out if out is not None and not where_expr else
                    check_out("--out", (folder or Path()) / f"{r}-tl.pt", ".pt")) for r in ids}
        models = [tl_model_of(the_lab, r, epoch) for r in ids]  # all checked before writing
        for model, net, tl, diff in models:
            write(the_lab, model, net, tl, diff, outs[model.run_id])
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    cls, many = models[0][1].cls_token, " (each file alike)" if len(ids) > 1 else ""
    print(f"load it{many}: from rulelab.models.tl_export import load_file; model = load_file("
          f"{str(outs[ids[0]])!r}) — feed tokens with CLS ({cls}) first (rulelab's "
          "model.to_tokens(x) adds it); logits at position 0")


def check_epoch(lab, run_ids: list[str], epoch: int | None) -> None:
    """``--epoch`` is a stored snapshot of every run (None: each has a final checkpoint); else
    one line naming the epochs there are and the word for the final checkpoint."""
    from rulelab.store.checkpoints import checkpoint_path

    for rid in run_ids:
        stored = lab.snapshot_epochs(rid)
        if epoch is None:
            if not checkpoint_path(lab.checkpoints_dir, rid).is_file():
                have = (f"stored snapshot epochs: {', '.join(map(str, stored))}; pass one as "
                        "--epoch" if stored else "and no weight snapshots")
                raise UserError(f"RUN_ID: run {rid} has no final checkpoint (status "
                                f"{lab.status(rid)}; {have})")
        elif epoch not in stored:
            have = (f"its stored snapshot epochs are {', '.join(map(str, stored))}" if stored
                    else "it kept no weight snapshots (train with --snapshots N)")
            raise UserError(f"--epoch: {epoch} is not stored for run {rid}; {have}; leave "
                            "--epoch out for the final checkpoint")


def tl_model_of(lab, run_id: str, epoch: int | None):
    """``(rulelab model, its transformer, TransformerLens model, (max |Δ logit|, inputs))``:
    the run's study declares how its transformer and inputs are found (``Task.tl_export``)."""
    import torch

    from rulelab.api.run_model import run_model
    from rulelab.models.tl_export import build, require_transformer_lens, tl_config, tl_state_dict
    from rulelab.study import resolve
    from rulelab.study_registry import task

    model = run_model(lab, run_id, epoch)
    adapter = task(model.config.task).tl_export  # the study's declaration
    found = resolve(adapter)(model) if adapter else None
    if found is None:
        raise UserError(f"RUN_ID: run {run_id} is a {type(model.ensemble).__name__}; only "
                        "transformer runs (EnsembleTransformer) have a TransformerLens "
                        "counterpart")
    net, x = found
    require_transformer_lens()
    tl = build(tl_config(net.cfg), tl_state_dict(net, model.member))
    with torch.no_grad():
        diff = (tl(net.add_cls(x.unsqueeze(0))[0])[:, 0]
                - net(x.unsqueeze(0).expand(net.n_members, -1, -1))[model.member])
    return model, net, tl, (float(diff.abs().max()), len(x))


def write(lab, model, net, tl, diff: tuple[float, int], out: Path) -> None:
    from rulelab.models.tl_export import export_file

    meta = {"run_id": model.run_id, "epoch": model.epoch, "lab": str(lab.root)}
    export_file(net, model.member, out, meta)
    print(f"wrote {out}: run {model.run_id} at epoch {model.epoch} as {type(tl).__name__}; "
          f"max |Δ logit| vs rulelab on {diff[1]} val inputs: {diff[0]:.2e}")


def export_app() -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, help="Export a stored run's model for other tools.")
    app.command("tl")(tl_cmd)
    return app
