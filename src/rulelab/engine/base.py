"""The generic ensemble training loop (DESIGN §1), shared by every task.

``E`` runs that share shapes train in one forward/backward pass. The loss is the sum over
members of each member's mean loss, so every member gets exactly its own gradient; nothing
reduces across members, and a member whose loss goes NaN is frozen and marked failed alone.

A full batch is computed in micro-batches of a fixed number of examples *per member*, whose
gradients accumulate into the same full-batch gradient: the per-step working set stays
cache-sized, and a member sums its gradient in the same order whatever ensemble it sits in, so
it equals the same run trained alone bitwise.

Subclasses supply the task: ``build_data``, ``build_model``, ``compute_metrics``,
``new_summary`` (each study's ``trainer`` module, in ``rulelab/studies/<study>/``); the
optimizer is the config's, built here for every study. Execution settings:
:class:`rulelab.settings.Settings`.

Speed without moving a number (DESIGN §6, issue 13): the first trainer keeps glibc's heap
(:mod:`rulelab.engine.allocator`), so activations are not page-faulted in afresh every
micro-batch. ``precision = "bf16"`` (off by default; it does move numbers) runs each
micro-batch's forward, and so its backward, under bf16 autocast for every task; weights,
gradients, the optimizer and evaluation stay fp32; ``"tf32"`` runs them with a CUDA GPU's fp32
matmuls on its TF32 tensor cores (:func:`tf32_matmuls`). ``engine = "compiled"`` (off by default; it
moves numbers too, recorded as engine version 3) compiles each micro-batch's ``loss`` — the
forward, the loss and through them the backward — with ``torch.compile``
(:mod:`rulelab.engine.compiled`).
"""

from __future__ import annotations

import contextlib
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
import torch

from rulelab.engine.allocator import keep_heap
from rulelab.engine.collector import setup_frozen
from rulelab.engine.compiled import compile_step, engine_in_use, engines_for, micro_batch_for
from rulelab.engine.per_example import cross_entropy
from rulelab.engine.threads import training_threads
from rulelab.errors import UserError
from rulelab.hardware import cpu_kernels
from rulelab.settings import Settings
from rulelab.store.version import COMPILED_ENGINE, STEP_ENGINES, engine_of

MetricRow = tuple[int, str, str, float]  # (epoch, split, metric, value)


def stream_seed(seed: int, stream: int) -> int:
    """A seed for random stream ``stream`` of run ``seed``, independent of the init stream."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])


@contextlib.contextmanager
def tf32_matmuls():
    """CUDA's fp32 matmuls on TF32 tensor cores inside, as they were after (``--precision
    tf32``: the training step only; evaluation stays fp32). PyTorch's newer switch alone: it
    refuses to read a state the older ``allow_tf32`` flag and it both set."""
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    matmul.fp32_precision = "tf32"
    try:
        yield
    finally:
        matmul.fp32_precision = before


class EnsembleTrainerBase(ABC):
    """Trains ``configs`` (shape-compatible runs of one task) as one ensemble."""

    def __init__(self, configs, options: Settings | None = None) -> None:
        if len({c.shape_key() for c in configs}) != 1:
            raise ValueError("members of one ensemble must share every shape field")
        self.configs = list(configs)
        self.options = options or Settings()
        keep_heap()  # no page faults for each micro-batch's activations (bitwise neutral)
        self.cfg, self.n_members = self.configs[0], len(self.configs)
        self.device = torch.device(self.options.device)
        self.data = self.build_data()
        self.model = self.build_model().to(self.device)
        self.engine_version = engine_in_use(self.options, self.cfg)  # recorded per member
        if hasattr(self.model, "engine"):  # the numerics this engine version computes
            self.model.engine = self.engine_version
        # The micro-batch step: the task's loss, compiled whole under the compiled engine, or
        # the model's own step under an engine where the model computes it (engine 11).
        self.step_loss = (compile_step(self.model, self.loss, self.n_members)
                          if self.engine_version == COMPILED_ENGINE else self.loss)
        self.tile = None  # examples per tile where the model's own step runs in tiles
        if self.engine_version in STEP_ENGINES:
            self.step_loss = self._model_step()
            self.tile = self.model.step_tile()
        self.opt = self.build_optimizer()
        # Minibatch order: one generator per member, independent of the ensemble it sits in.
        self.generators = [torch.Generator().manual_seed(stream_seed(c.seed, 7))
                           for c in self.configs]
        self.summaries = [self.new_summary(c) for c in self.configs]
        self.rows: list[list[MetricRow]] = [[] for _ in self.configs]
        # [(first epoch, engine version)] each member trained under (store.version, issue 25)
        self.engines: list[list[tuple[int, int]]] = [[(0, self.engine_version)]
                                                     for _ in self.configs]
        # [(first epoch, kind of CPU)] each member trained on: the numbers are bitwise the same
        # only on one kind (hardware.cpu_kernels); None on an accelerator
        self.cpu = cpu_kernels() if self.device.type == "cpu" else None
        self.cpus: list[list[tuple[int, str]]] = [[(0, self.cpu)] if self.cpu else []
                                                  for _ in self.configs]
        self.epoch = 0
        # examples per member per pass: --micro-batch, or the engine's for this shape
        self.micro_batch = micro_batch_for(self.options, self.cfg)

    # --- what a task supplies -----------------------------------------------------------------
    @abstractmethod
    def build_data(self):
        """Stacked member data with at least ``train_x [E, N, …]`` and ``train_y [E, N]``."""

    @abstractmethod
    def build_model(self) -> torch.nn.Module:
        """The ensemble model, ``[E, B, …] → [E, B, k]`` logits."""

    def build_optimizer(self):
        """A batched optimizer with ``step, zero_grad, active, deactivate, member_state``: the
        one each config names (``optimizer``, ``lr``, ``weight_decay``, …;
        :func:`rulelab.optim.factory.make_optimizer`), per-member hyperparameters. Every study
        uses it (issue 22: before, four trainers wrote the same body)."""
        from rulelab.optim.factory import make_optimizer

        return make_optimizer(self.configs, list(self.model.named_parameters()), self.n_members)

    @abstractmethod
    def compute_metrics(self) -> dict[tuple[str, str], torch.Tensor]:
        """``{(split, metric): [E] tensor}`` at the current weights."""

    @abstractmethod
    def new_summary(self, cfg):
        """A per-member summary with ``update, as_dict, from_dict, failed_reason``."""

    def summary_from_dict(self, cfg, d: dict):
        return type(self.new_summary(cfg)).from_dict(d, cfg)

    @property
    def total_epochs(self) -> int:
        return self.cfg.epochs

    def is_eval_epoch(self) -> bool:
        return self.epoch % self.cfg.eval_every == 0 or self.epoch == self.total_epochs

    # --- one epoch ----------------------------------------------------------------------------
    def loss(self, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        """``[E]`` per-member cross-entropy sums of this chunk divided by the batch size."""
        return cross_entropy(self.model(x), y).sum(1) / denom  # model(x): logits [E, b, k]

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context the training forward runs in: bf16 autocast, TF32 matmuls, or nothing
        for fp32."""
        if self.options.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        if self.options.precision == "tf32":
            return tf32_matmuls()
        return contextlib.nullcontext()

    def _backward_batch(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Accumulate the mean-loss gradient of batch ``x [E, B, …]`` in micro-batches."""
        B = x.shape[1]
        total = torch.zeros(self.n_members, dtype=torch.float64, device=self.device)
        for s in range(0, B, self.micro_batch):
            with self.autocast():
                loss = self.step_loss(x[:, s : s + self.micro_batch],
                                      y[:, s : s + self.micro_batch], B).float()
            loss.sum().backward()
            total += loss.detach().double()
        return total

    def _model_step(self) -> Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]:
        """The model's own step, ``(x, y, denom) → [E]`` losses whose backward gives the
        gradients, under an engine where the model computes the whole step
        (:data:`~rulelab.store.version.STEP_ENGINES`); a :class:`UserError` naming ``--engine``
        where this model, this task's loss or these settings cannot run it."""
        v, task = self.engine_version, getattr(self.cfg, "task", "these")
        if v not in getattr(self.model, "step_engines", ()):
            raise UserError(f"--engine: {v} is not allowed for this {task} model: it does not "
                            f"compute its own training step; use --engine eager")
        # the model's own eager engine computes any loss and precision (the transformer's: 10)
        other = getattr(self.model, "eager_engine", None)
        hint = f"--engine {other}" if other not in (None, v) else "--engine compiled"
        if other is not None and str(other) not in engines_for(self.cfg, self.device):
            hint = "--engine eager"  # its own eager engine is not offered here (a GPU)
        if type(self).loss is not EnsembleTrainerBase.loss:
            raise UserError(f"--engine: {v} computes the cross-entropy only, and {task} runs "
                            f"train with a loss of their own; use {hint}")
        why = self.model.step_unsupported(self.options)
        if why is not None:
            raise UserError(f"--engine: {v} cannot train these {task} runs ({why}); use {hint}")
        return self.model.step_loss

    @property
    def step_examples(self) -> int:
        """Examples per member in one optimizer step: the full batch, or a minibatch (a task
        that draws fresh examples every step has no training set: its batch)."""
        bs, train_x = getattr(self.cfg, "batch_size", 0), getattr(self.data, "train_x", None)
        if train_x is None:
            return bs
        N = train_x.shape[1]
        return N if bs in (0, N) else bs

    def batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The epoch's batches: the full batch, or per-member shuffled minibatches."""
        data, bs = self.data, getattr(self.cfg, "batch_size", 0)
        N = data.train_x.shape[1]
        if bs in (0, N):
            return [(data.train_x, data.train_y)]
        # [E, N] per-member permutations, from each member's own generator.
        perm = torch.stack([torch.randperm(N, generator=g) for g in self.generators])
        perm = perm.to(self.device)
        member = torch.arange(self.n_members, device=self.device).unsqueeze(1)
        return [(data.train_x[member, idx], data.train_y[member, idx])
                for idx in perm.split(bs, dim=1)]

    def train_epoch(self) -> torch.Tensor:
        """One epoch (one step at full batch); returns the ``[E]`` loss of its last step."""
        with training_threads(self.device):  # one CPU thread: part of the numerics
            return self._train_epoch()

    def _train_epoch(self) -> torch.Tensor:
        for x, y in self.batches():
            self.opt.zero_grad()
            loss = self._backward_batch(x, y)
            bad = ~torch.isfinite(loss).cpu() & self.opt.active
            if bad.any():
                self._fail(bad, f"loss became non-finite at epoch {self.epoch + 1}")
            self.opt.step()
        self.epoch += 1
        return loss

    def _fail(self, members: torch.Tensor, reason: str) -> None:
        self.opt.deactivate(members)
        for e in torch.nonzero(members).flatten().tolist():
            self.summaries[e].failed_reason = reason

    # --- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> dict[tuple[str, str], torch.Tensor]:
        """Evaluate all members and append the rows of the members still active."""
        was_training = self.model.training
        self.model.eval()
        with training_threads(self.device):  # the numbers recorded: as the steps, one thread
            metrics = self.compute_metrics()
        self.model.train(was_training)
        for e, summary in enumerate(self.summaries):
            if summary.failed_reason is not None:
                continue
            values = {key: float(v[e]) for key, v in metrics.items()}
            summary.update(self.epoch, values)
            self.rows[e].extend((self.epoch, s, m, v) for (s, m), v in values.items())
        return metrics

    def fit(self, on_epoch: Callable[[EnsembleTrainerBase, bool], None] | None = None) -> None:
        """Train to the last epoch, evaluating at epoch 0, on schedule and at the end.

        ``on_epoch(trainer, evaluated)`` runs after the initial evaluation and every epoch
        (tracked analyses too compute on one CPU thread, :mod:`rulelab.engine.threads`).
        """
        with training_threads(self.device), setup_frozen():
            self._fit(on_epoch)

    def _fit(self, on_epoch) -> None:
        if self.epoch == 0 and not any(self.rows):
            self.evaluate()
            if on_epoch:
                on_epoch(self, True)
        self.model.train()
        while self.epoch < self.total_epochs:
            self.train_epoch()
            evaluated = self.is_eval_epoch()
            if evaluated:
                self.evaluate()
            if on_epoch:
                on_epoch(self, evaluated)

    # --- per-member state (checkpoints) ------------------------------------------------------
    def member_state(self, e: int) -> dict:
        return {
            "epoch": self.epoch,
            "params": {n: p[e].detach().cpu().clone() for n, p in self.model.named_parameters()},
            "optim": self.opt.member_state(e),
            "generator": self.generators[e].get_state(),
            "summary": self.summaries[e].as_dict(),
            "rows": list(self.rows[e]),
            "engine_version": self.engine_version,
            "engines": [list(p) for p in self.engines[e]],
            # what cuts a step into passes (store.version.micro_batch_refusal): part of the numbers
            "micro_batch": self.micro_batch,
            "step_examples": self.step_examples,
            "precision": self.options.precision,  # store.version.precision_refusal
            "tile": self.tile,  # fixed by the shape and the engine version: shown, not judged
            "cpus": [list(p) for p in self.cpus[e]],  # hardware.cpu_kernels, per stretch
        }

    def load_member_state(self, e: int, state: dict) -> None:
        if self.epoch not in (0, state["epoch"]) or (e > 0 and state["epoch"] != self.epoch):
            raise ValueError("members of one ensemble must resume from the same epoch")
        self.epoch = int(state["epoch"])
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                p[e].copy_(state["params"][n])
        self.opt.load_member_state(e, state["optim"])
        self.generators[e].set_state(state["generator"])
        self.summaries[e] = self.summary_from_dict(self.configs[e], state["summary"])
        self.rows[e] = list(state["rows"])
        engines = [tuple(p) for p in state.get("engines", [(0, engine_of(state))])]
        if engines[-1][1] != self.engine_version:  # resumed under another engine: recorded
            engines.append((self.epoch, self.engine_version))
        self.engines[e] = engines
        cpus = [tuple(p) for p in state.get("cpus", [])]
        if self.cpu and cpus and cpus[-1][1] != self.cpu:  # on another kind of CPU: said, kept
            warnings.warn(f"run {self.configs[e].run_id} was trained to epoch {self.epoch} on "
                          f"a {cpus[-1][1]} CPU and resumes on a {self.cpu} one: its kernels "
                          "round otherwise, so from here on its numbers are this CPU's (both "
                          "recorded in its checkpoint)", RuntimeWarning, stacklevel=2)
        if self.cpu and (not cpus or cpus[-1][1] != self.cpu):
            cpus.append((self.epoch, self.cpu))
        self.cpus[e] = cpus
