"""The kind of CPU each stretch of a run trained on (``hardware.cpu_kernels``): recorded in its
checkpoint, and a resume on another kind said in one warning (the same config, seed and engine
give other numbers there: MKL and PyTorch pick kernels by the CPU's vendor and vector width)."""

import warnings

import pytest
import torch

from rulelab.hardware import cpu_kernels
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

CFG = MPSPRunConfig(seq_len=5, vocab=12, n_train=64, n_eval=32, d_model=16, d_mlp=32, heads=2,
                    layers=1, epochs=2, eval_every=1, seed=0)


def _trained():
    trainer = MPSPTrainer([CFG], Settings())
    trainer.fit()
    return trainer


def test_a_checkpoint_records_the_cpu_and_a_resume_on_the_same_kind_adds_nothing():
    kind = cpu_kernels()
    assert kind.split()[-1] == torch.backends.cpu.get_cpu_capability() and len(kind.split()) == 2
    state = _trained().member_state(0)
    assert state["cpus"] == [[0, kind]]
    resumed = MPSPTrainer([CFG.model_copy(update={"epochs": 4})], Settings())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on the same kind
        resumed.load_member_state(0, state)
    resumed.fit()
    assert resumed.member_state(0)["cpus"] == [[0, kind]]


def test_a_resume_on_another_kind_of_cpu_is_said_and_recorded():
    # as another kind of CPU would have written it: an AVX2-only EPYC's, or (on one) a Xeon's
    other = next(k for k in ("AuthenticAMD AVX2", "GenuineIntel AVX512") if k != cpu_kernels())
    state = _trained().member_state(0)
    state["cpus"] = [[0, other]]
    longer = CFG.model_copy(update={"epochs": 4})
    resumed = MPSPTrainer([longer], Settings())
    with pytest.warns(RuntimeWarning, match=rf"run {longer.run_id} was trained to epoch 2 on a "
                                            rf"{other} CPU and resumes on a {cpu_kernels()} one"):
        resumed.load_member_state(0, state)
    resumed.fit()
    assert resumed.member_state(0)["cpus"] == [[0, other], [2, cpu_kernels()]]
