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
