"""Study S, "shortcut saturation" (SPEC S): small transformers on the MPSP tasks — when does a
network learn the rule (sum mod k) rather than a shortcut (max or first element mod k)?

Everything particular to study S is in this package:

- ``config.py`` (MPSP × transformer × AdamW, SPEC S.1–S.3), ``dataset.py`` (data checks and
  ``rulelab data mpsp``), ``data.py`` / ``evaluate.py`` / ``trainer.py`` (the ensemble trainer),
  ``summary.py`` (the S.3 criterion) and ``summary_frames.py`` (labs of the old criterion);
- ``cost.py`` (the planner's estimate), ``tracking.py`` (analyses during training);
- ``analysis/`` (gradients, ablation, twins, patching, circuits, phases: SPEC S.4) and
  ``commands.py`` (``rulelab analyze …``);
- ``invariants.py`` (what a smaller scale keeps of the paper's: parameters per example,
  optimizer time constants; the scale map's "not testable at this scale");
- ``paper.py`` (the paper's setting and headline), ``views.py`` (rate-table columns, curves and
  report figures), ``figures.py``, ``reproduce.py``; ``recipes/`` (quick, medium, the ladder's rungs
  ladder-2k/4k/8k, paper, variants).
"""

from pathlib import Path

from rulelab.studies.shortcut_saturation.analyses import ANALYSES
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.cost import mpsp_cost
from rulelab.studies.shortcut_saturation.dataset import DATA_FIELDS, check
from rulelab.studies.shortcut_saturation.invariants import ALL as INVARIANTS
from rulelab.study import Calibration, Claim, DataCommand, Study, Task

_HERE = "rulelab.studies.shortcut_saturation"

MPSP = Task(
    name="mpsp",
    config=MPSPRunConfig,
    trainer=f"{_HERE}.trainer:MPSPTrainer",
    data_builder=f"{_HERE}.trainer:build_data",
    model_builder=f"{_HERE}.trainer:build_model",
    eager_engine="rulelab.models.transformer:eager_engine",  # 10 (store.version)
    pass_examples="rulelab.models.passes:pass_examples",  # engine 10: sized to the model
    tl_export=f"{_HERE}.trainer:tl_export",
    cost=mpsp_cost,
    # bench/gpu_check.sh on one H200 (docs/performance.md, "On a GPU"): the paper config's
    # eager step at E = 64–256; a 2-member ensemble spent 13 ms (1L) to 38 ms (2L) a pass
    # beyond its FLOPs (kernel launches: the host's cost), a large one ~0
    gpu_flops={"fp32": 9.7e12, "bf16": 12.1e12, "tf32": 10.0e12},
    gpu_pass_s=20e-3,
    gpu_measured="one H200, 2026-12-04",
    views=f"{_HERE}.views:VIEW",
    help="Train MPSP transformers over a grid of values × seeds, packed into ensembles.",
    axes=("layers", "heads", "ratio", "weight_decay", "lr", "data_seed"),
    check=check,
    shape_flags="--d-model/--d-mlp/--layers/--n-train",
    checkpoint_every=500,
    trackers={n: f"{_HERE}.tracking:{n}" for n in ("gradients", "fingerprints", "ablation")},
    data=DataCommand(DATA_FIELDS, make=f"{_HERE}.dataset:splits",
                     write=f"{_HERE}.dataset:write"),
)

STUDY = Study(
    name="shortcut-saturation",
    title="Shortcut saturation",
    tasks=(MPSP,),
    recipes=Path(__file__).parent / "recipes",
    reproduce=f"{_HERE}.reproduce:reproduce",
    analyses=ANALYSES,
    claims=(  # read at every scale by `rulelab scale-map shortcut-saturation` (claims.py)
        Claim("S1", "depth × imbalance: from r = 0.5 to 0.9 the 2-layer rate rises (paper 0% → "
              "77%) and the 1-layer rate falls (33% → 0%)", f"{_HERE}.claims:depth_imbalance",
              needs=INVARIANTS),
        Claim("S5", "distance from chance: a ratio below chance promotes generalization as one "
              "above does, and r = 1/k suppresses it", f"{_HERE}.claims:distance_from_chance",
              needs=INVARIANTS),
        Claim("S6", "weight decay 0.1 → 0.4: more seeds generalize only transiently",
              f"{_HERE}.claims:weight_decay_transience", needs=INVARIANTS),
    ),
    invariants=f"{_HERE}.invariants:invariants",  # what a fair smaller scale keeps (issue 20)
    calibrations=(  # `rulelab calibrate shortcut-saturation`: each detector against its null
        Calibration("S1 verdict", "the scale map's 'shows': 2L rises and 1L falls with "
                    "disjoint 95% Wilson intervals", f"{_HERE}.claim_null:s1_check"),
        Calibration("S5 verdict", "the scale map's 'shows': 2L's best ratio below and above "
                    "chance each beat chance beyond the intervals",
                    f"{_HERE}.analyses.verdict_null:s5_check"),
        Calibration("S6 verdict", "the scale map's 'shows': more transient 2L seeds at the "
                    "largest weight decay, beyond the intervals",
                    f"{_HERE}.analyses.verdict_null:s6_check"),
        Calibration("phase-2 onset", "`analyze phases`: the rule starts to win after phase 1",
                    f"{_HERE}.analyses.phase_null:onset_check"),
        Calibration("transient", "generalized, then adv below 95% later",
                    f"{_HERE}.analyses.phase_null:transient_check"),
        Calibration("OV probe band", "`analyze fingerprints`: a head decodes v mod k from what "
                    "it writes, above random heads' band",
                    f"{_HERE}.analyses.probe_null:probe_check"),
    ),
)
