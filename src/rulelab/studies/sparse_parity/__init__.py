"""Sparse parity (Barak, Edelman, Goel, Kakade, Malach & Zhang 2022, "Hidden progress in deep
learning: SGD learns parities near the computational limit", NeurIPS 2022, arXiv:2207.08799):
the third study, declared wholly in this folder (issue 9's proof of the study interface).

**Task.** ``x ∈ {±1}^n`` uniform, ``y = χ_S(x) = ∏_{i∈S} x_i`` for a hidden support ``S`` of size
k. The label has no correlation with any set of fewer than k bits, so a learner must find S among
C(n, k) candidates; SGD on neural networks does so in ``n^{O(k)}`` steps, near the statistical-
query lower bound, with a long plateau at chance followed by a sharp drop of the loss — and,
the paper's point, *hidden progress* during the plateau: the weights move steadily towards
the support while loss and accuracy show nothing.

**Setup taken from the paper** (and its public summaries, see README.md in this folder): a
2-layer ReLU MLP of width 1000, online SGD (fresh samples every step) with batch size 32,
learning rate 0.1, hinge loss, n = 50 and k = 3 for the headline curves; Adam, other
architectures (including transformers) and finite training sets also appear there. Defaults of
:class:`~.config.SparseParityRunConfig` follow that setting; the quick recipe shrinks it.

**Measured.** Per evaluation (:mod:`.trainer`): loss and accuracy on a fixed evaluation set of
4,096 examples (and on the training set when it is fixed); the first layer's *support mass*
(share of its squared weights on the support coordinates, :mod:`.metrics`); the output's
correlation with χ_S and its *Fourier gap* over the other k-subsets. Per run (:mod:`.summary`):
learned (eval acc ≥ 99% at an evaluation), steps to learn, and the steps at which hidden
progress (support mass +10% *and* above the null band of the run's off-support k-subsets,
before visible progress: :mod:`.hidden_null`), Fourier progress (χ_S the top coefficient) and
visible progress (eval acc ≥ 60%) first show. Tables (:mod:`.analysis`): steps to learn vs n
with Wilson intervals on the learned fraction and a fitted log–log exponent with its CI over
seeds, per k, and its growth with k (:mod:`.scaling`); figures (:mod:`.figures`). ``rulelab
calibrate sparse-parity`` checks the hidden-progress call against its null
(:mod:`.hidden_calibration`).

Files: ``config.py`` (run config), ``task.py`` (numpy task, ``rulelab data``), ``data.py``
(member-axis tensors, fresh batches), ``model.py`` (ensemble MLP; study S's transformer on bit
tokens), ``metrics.py``, ``summary.py``, ``trainer.py``, ``tracking.py`` (``--track
coordinates``), ``hidden_null.py`` (the null band), ``hidden_calibration.py`` (its
calibration), ``steps_tables.py`` (steps-to-learn tables, slopes), ``scaling.py``
(exponents per k), ``figures.py``, ``views.py``
(rate table and report), ``reproduce.py``, ``cost.py`` (the planner's estimate),
``recipes/quick.yaml``, ``recipes/scaling-k.yaml`` (k ∈ {2, 3, 4}).
"""

from pathlib import Path

from rulelab.studies.sparse_parity.config import SparseParityRunConfig
from rulelab.studies.sparse_parity.cost import sparse_parity_cost
from rulelab.studies.sparse_parity.task import DATA_FIELDS
from rulelab.study import Calibration, DataCommand, Study, Task

_HERE = "rulelab.studies.sparse_parity"

SPARSE_PARITY = Task(
    name="sparse_parity",
    config=SparseParityRunConfig,
    trainer=f"{_HERE}.trainer:SparseParityTrainer",
    data_builder=f"{_HERE}.data:build_data",
    model_builder=f"{_HERE}.model:build_model",
    eager_engine=f"{_HERE}.model:eager_engine",  # the MLP: engine 6 (model.py)
    pass_examples=f"{_HERE}.model:pass_examples",  # the transformer's under engine 10
    tl_export=f"{_HERE}.model:tl_export",
    cost=sparse_parity_cost,
    views=f"{_HERE}.views:VIEW",
    help="Train MLPs (or transformers) on k-sparse parities of n bits over a grid × seeds.",
    axes=("n_bits", "k", "width", "batch_size", "lr", "weight_decay", "data_seed"),
    shape_flags="--width/--n-bits/--batch-size/--n-eval",
    checkpoint_every=2000,
    trackers={"coordinates": f"{_HERE}.tracking:coordinates"},
    data=DataCommand(DATA_FIELDS, make=f"{_HERE}.task:example_sets", write=f"{_HERE}.task:write"),
)

STUDY = Study(
    name="sparse-parity",
    title="Sparse parity: hidden progress",
    tasks=(SPARSE_PARITY,),
    recipes=Path(__file__).parent / "recipes",
    reproduce=f"{_HERE}.reproduce:reproduce",
    calibrations=(  # `rulelab calibrate sparse-parity`: each detector against its null
        Calibration("hidden progress", "support mass rose before visible progress, above the "
                    "band of the run's off-support k-subsets",
                    f"{_HERE}.hidden_calibration:hidden_check"),
    ),
)
