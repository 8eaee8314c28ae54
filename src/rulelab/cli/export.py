"""``rulelab export tl RUN_ID``: one stored run as a TransformerLens model file (issue 10).

The file holds the TransformerLens config and the weights in HookedTransformer's names
(:func:`rulelab.models.tl_export.export_file`); ``rulelab.models.tl_export.load_file(path)``
rebuilds the model — with TransformerLens ≥ 4 (tested: 4.3.0) a
``TransformerBridge.boot_native`` model, with older versions a ``HookedTransformer``. Before
writing, the command builds that model and checks its logits against the run's own on the
run's validation inputs, and prints the largest difference.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rulelab.cli.options import LabOpt, check_out, open_lab, print_warnings
from rulelab.errors import UserError

RunIdArg = typer.Argument(..., help="the run to export: its id or a unique prefix (as shown "
                          "by `rulelab runs --ids`)")
OutOpt = typer.Option(None, "--out", help="the file to write, ending in .pt (default "
                      "RUN_ID-tl.pt in the current folder)")
EpochOpt = typer.Option(None, "--epoch", help="a stored weight-snapshot epoch instead of the "
                        "final checkpoint")


def tl_cmd(run_id: str = RunIdArg, lab: Path | None = LabOpt, out: Path | None = OutOpt,
           epoch: int | None = EpochOpt) -> None:
    """Export a transformer run as a TransformerLens model (needs transformer_lens:
    pip install transformer_lens). TransformerLens ≥ 4: TransformerBridge.boot_native; older:
    HookedTransformer. Feed it the tokens with CLS (id V) first; logits at position 0."""
    import torch

    from rulelab.api.run_model import run_model
    from rulelab.models.tl_export import (
        build,
        export_file,
        require_transformer_lens,
        tl_config,
        tl_state_dict,
    )
    from rulelab.store import StoreError
    from rulelab.study import resolve
    from rulelab.study_registry import task

    if out is not None:
        out = check_out("--out", out, ".pt")
    if epoch is not None and epoch < 0:
        raise UserError(f"--epoch: {epoch} is not allowed; give a stored snapshot epoch ≥ 0")
    the_lab = open_lab(lab, create=False)
    try:
        model = run_model(the_lab, run_id, epoch)  # a prefix is resolved to the full id
        run_id = model.run_id
        out = out or check_out("--out", Path(f"{run_id}-tl.pt"), ".pt")
        adapter = task(model.config.task).tl_export  # the study's declaration
        found = resolve(adapter)(model) if adapter else None
        if found is None:
            raise UserError(f"RUN_ID: run {run_id} is a {type(model.ensemble).__name__}; only "
                            "transformer runs (EnsembleTransformer) have a TransformerLens "
                            "counterpart")
        net, x = found
        require_transformer_lens()
        tl_model = build(tl_config(net.cfg), tl_state_dict(net, model.member))
        with torch.no_grad():
            diff = (tl_model(net.add_cls(x.unsqueeze(0))[0])[:, 0]
                    - net(x.unsqueeze(0).expand(net.n_members, -1, -1))[model.member])
        meta = {"run_id": run_id, "epoch": model.epoch, "lab": str(the_lab.root)}
        export_file(net, model.member, out, meta)
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    print(f"wrote {out}: run {run_id} at epoch {model.epoch} as {type(tl_model).__name__}; "
          f"max |Δ logit| vs rulelab on {len(x)} val inputs: {diff.abs().max().item():.2e}")
    print(f"load it: from rulelab.models.tl_export import load_file; model = "
          f"load_file({str(out)!r}) — feed tokens with CLS ({net.cls_token}) first; "
          "logits at position 0")


def export_app() -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, help="Export a stored run's model for other tools.")
    app.command("tl")(tl_cmd)
    return app
