"""``lab.model(run_id, epoch=None)``: one stored run's trained model (issue 10).

The run is rebuilt as an ensemble of one (:func:`rulelab.analysis.loading.load_ensembles`, the
loader the post-hoc analyses use: no trainer, no optimizer, issue 22), with its final
checkpoint or a weight snapshot, and handed
out as a :class:`~rulelab.models.member.MemberModel`: inputs and activations without the
member axis, TransformerLens hook names, ``.config``, ``.data`` (the run's data, rebuilt
deterministically from its config) and ``.epoch``.
"""

from __future__ import annotations

from rulelab.analysis.loading import load_ensembles
from rulelab.api.find_runs import resolve_run
from rulelab.errors import UserError
from rulelab.models.member import MemberModel
from rulelab.store import Lab
from rulelab.store.checkpoints import checkpoint_path
from rulelab.study_registry import config_from_flat


def run_model(lab: Lab, run_id: str, epoch: int | None = None,
              device: str = "cpu") -> MemberModel:
    """The model of ``run_id`` (or a unique prefix of it) at its final checkpoint
    (``epoch=None``) or a stored snapshot epoch, in eval mode; bad input is one
    :class:`UserError` line naming what is stored."""
    rows = {r["run_id"]: r for r in lab.runs_json()}
    run_id = resolve_run(run_id, list(rows), lab.root)  # a unique prefix names a run
    cfg = config_from_flat(rows[run_id]["config"])
    snapshots = lab.snapshot_epochs(run_id)
    if epoch is None and not checkpoint_path(lab.checkpoints_dir, run_id).is_file():
        have = f"stored snapshot epochs: {snapshots}" if snapshots else "no weight snapshots"
        raise UserError(f"epoch: run {run_id} has no final checkpoint "
                        f"(status {rows[run_id]['status']}; {have})")
    if epoch is not None and int(epoch) not in snapshots:
        have = (f"stored: {', '.join(map(str, snapshots))}" if snapshots else
                "the run kept no weight snapshots (train with --snapshots N)")
        raise UserError(f"epoch: {epoch} is not allowed for run {run_id} ({have}); or use "
                        "None for the final checkpoint")
    (ens,) = load_ensembles(lab, [cfg], epoch=None if epoch is None else int(epoch),
                            max_members=1, device=device)
    model = MemberModel(ens.model, 0, config=cfg, data=ens.data)
    model.epoch = ens.epoch
    model.run_id = run_id
    return model.eval()
