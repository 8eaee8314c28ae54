"""Study M's cost model for the planner (``Task.cost``; :mod:`rulelab.sweep.estimate`): its
explicit evaluation schedule (log-spaced early evaluations) counted in the FLOPs left."""

from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.sweep.estimate import run_cost


def test_modular_cost_follows_the_eval_schedule():
    c = ModularRunConfig(p=31, width=65, epochs=300, eval_every=100, log_eval_steps=20)
    cost = run_cost(c)
    assert cost.flops_per_epoch == 3 * 2 * 65 * 31 * round(31 * 31 * 0.5)
    assert cost.eval_epochs[0] == 0 and cost.eval_epochs[-1] == 300
    assert cost.flops(c) > cost.flops(c, 150) > cost.flops(c, 300) == 0


def test_a_micro_batch_above_the_training_set_costs_the_training_set():
    """A full-batch pass holds the training pairs, however large the micro-batch asked for."""
    c = ModularRunConfig(p=113, width=4097, train_frac=0.8)
    n_train = round(113 * 113 * 0.8)
    at_n = run_cost(c, micro_batch=n_train, eval_chunk=113 * 113).member_bytes
    assert run_cost(c, micro_batch=2**19, eval_chunk=2**19).member_bytes == at_n
    assert run_cost(c, micro_batch=1024).member_bytes < at_n
