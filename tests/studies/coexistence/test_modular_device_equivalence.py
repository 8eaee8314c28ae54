"""Study M's member ≡ solo on the test device (``RULELAB_TEST_DEVICE``, default cpu; DESIGN §1;
``bench/gpu_check.sh`` runs it with ``cuda`` on a lent GPU): a member of a 3-member ensemble
(different noise, weight decay) ends with the weights and metric rows of the same run trained
alone. The engine's own check, on the toy study: tests/engine/train/test_device_equivalence.py."""

from equivalence import check_on_device
from rulelab.studies.coexistence.config import ModularRunConfig

M_TINY = dict(p=11, width=16, epochs=30, eval_every=10, log_eval_steps=5, lr=3e-3)


def test_study_m_member_equals_alone_on_device():
    check_on_device([ModularRunConfig(**{**M_TINY, "noise": a, "weight_decay": w, "seed": s})
                     for a, w, s in [(0.0, 0.1, 0), (0.5, 0.3, 1), (0.8, 0.0, 2)]], micro_batch=24)
