"""Sweeps: recipes → a plan of ensemble chunks → an executor (local or Ray) → the lab — the one
run path of ``rulelab train``, ``reproduce`` and ``sweep``.

- :mod:`~rulelab.sweep.recipe`: load and validate recipes (``file:line`` errors), or make one
  from command-line flags.
- :mod:`~rulelab.sweep.planner`: pack runs into chunks that fit memory, seeds interleaved.
- :mod:`~rulelab.sweep.estimate`: memory and FLOP estimates from shapes.
- :mod:`~rulelab.sweep.chunk`: the chunk spec and the one function every executor runs.
- :mod:`~rulelab.sweep.executors`: ``LocalExecutor`` (default) and ``RayExecutor``.
- :mod:`~rulelab.sweep.driver`: the registry's one writer; resume; the lab lock.
"""

from rulelab.settings import Settings
from rulelab.sweep.chunk import ChunkSpec, RunOutcome, run_chunk
from rulelab.sweep.driver import SweepResult, make_plan, run_sweep
from rulelab.sweep.executors import LocalExecutor, RayExecutor
from rulelab.sweep.recipe import Recipe, RecipeError, load_recipe, recipe_from_flags

__all__ = [
    "ChunkSpec", "LocalExecutor", "RayExecutor", "Recipe", "RecipeError", "RunOutcome",
    "Settings", "SweepResult", "load_recipe", "make_plan", "recipe_from_flags", "run",
    "run_chunk", "run_sweep",
]
run = run_sweep  # the name before issue 22, kept for code that imported it
