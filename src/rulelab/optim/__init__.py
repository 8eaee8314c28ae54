"""Batched optimizers over stacked ``[E, ...]`` parameters with per-member ``[E]`` hyperparameters.

SPEC M.3: AdamW (default), Adam (optional L2), SGD, Muon (AdamW for non-matrix parameters).
Each member follows the matching ``torch.optim`` optimizer exactly (oracle tests in
``tests/engine/optim/``: test_adamw.py, test_optimizers.py). All expose ``step()``,
``zero_grad()``, ``active``, ``deactivate(mask)``, ``step_count``, ``state_dict()`` /
``load_state_dict()`` and per-member ``member_state(e)`` / ``load_member_state(e, state)``.
"""

from rulelab.optim.adam import BatchedAdam
from rulelab.optim.adamw import BatchedAdamW
from rulelab.optim.factory import OPTIMIZERS, make_optimizer
from rulelab.optim.muon import BatchedMuon, newton_schulz
from rulelab.optim.sgd import BatchedSGD

__all__ = [
    "OPTIMIZERS",
    "BatchedAdam",
    "BatchedAdamW",
    "BatchedMuon",
    "BatchedSGD",
    "make_optimizer",
    "newton_schulz",
]
