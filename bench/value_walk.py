"""How far a value travels (issue 22 item 6), measured by tracing real commands, not by reading.

Two walks, each traced in-process with :func:`sys.setprofile` while ``rulelab`` runs a tiny
command against a throw-away lab:

- **weight decay** (a sentinel value no default uses) from ``--weight-decay`` (``rulelab train
  TASK``) or a recipe's ``base.weight_decay`` (``rulelab sweep FILE``) to the batched
  optimizer's constructor, one command per study. *Hops* are the rulelab functions on the call
  stack where the run's config is built and where the optimizer is constructed (the value's
  way down; typer, click and pydantic frames left out); *files* are their source files;
  *builds* counts the constructions of the run's config object (flags or recipe → config; a
  rebuild from a flat dict counts again).
- **the lab path** from ``--lab`` to the store: every rulelab function that receives the lab in
  an argument, and the form it has there (``PosixPath``, ``str``, ``Lab``, a chunk spec's field,
  …); *files* are their source files, *forms* the distinct types.

Run with the sources to measure first on the path::

    PYTHONPATH=src python bench/value_walk.py            # this tree
    mkdir /tmp/before && git archive 8857f81 src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src python bench/value_walk.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import tempfile
from pathlib import Path, PurePath

WD = 0.0123  # the sentinel weight decay
TINY = {  # per study: one task and flags that train in a second
    "shortcut-saturation": ("mpsp", {"seq_len": 6, "vocab": 6, "n_train": 64, "n_eval": 32,
                                     "layers": 1, "heads": 1, "d_model": 8, "d_mlp": 16,
                                     "epochs": 2, "eval_every": 1}),
    "coexistence": ("modular", {"p": 7, "width": 5, "epochs": 2, "eval_every": 1}),
    "sparse-parity": ("sparse_parity", {"n_bits": 6, "k": 2, "width": 8, "n_eval": 32,
                                        "epochs": 2, "eval_every": 1}),
}


def flags(values: dict) -> list[str]:
    return [t for k, v in values.items() for t in (f"--{k.replace('_', '-')}", str(v))]


def run_cli(argv: list[str]) -> None:
    from rulelab.cli import main

    sys.argv = ["rulelab", *argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main()
    except SystemExit as e:
        if e.code not in (0, None):
            raise RuntimeError(f"rulelab {' '.join(argv)} exited with {e.code}") from None


class Tracer:
    """Records the rulelab frames on the stack at chosen calls (see the module docstring)."""

    def __init__(self, src: Path, lab: Path) -> None:
        self.src, self.lab = str(src), lab
        self.stacks: list[list[tuple[str, str]]] = []  # config builds and the optimizer
        self.builds = 0
        self.optimizer_seen = False
        self.worker_gets = ""  # what the worker's run_chunk receives the run's config as
        self.lab_hops: dict[tuple[str, str], set[str]] = {}
        self.wd_hops: dict[tuple[str, str], set[str]] = {}  # every function receiving it

    def ours(self, frame) -> bool:
        return frame.f_code.co_filename.startswith(self.src)

    def stack(self, frame) -> list[tuple[str, str]]:
        out = []
        while frame is not None:
            if self.ours(frame):
                rel = os.path.relpath(frame.f_code.co_filename, self.src)
                out.append((rel, frame.f_code.co_qualname))
            frame = frame.f_back
        return out[::-1]

    def __call__(self, frame, event, arg) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "__init__" and code.co_filename.endswith(os.path.join("pydantic",
                                                                                 "main.py")):
            data = frame.f_locals.get("data") or {}
            if isinstance(data, dict) and data.get("weight_decay") == WD:
                self.builds += 1
                self.stacks.append(self.stack(frame.f_back))
            return
        if not self.ours(frame):
            return
        rel = os.path.relpath(code.co_filename, self.src)
        if (code.co_name == "__init__" and rel.startswith(os.path.join("rulelab", "optim"))
                and not self.optimizer_seen and _holds_wd(frame.f_locals.get("weight_decay"))):
            self.optimizer_seen = True
            self.stacks.append(self.stack(frame))
        if code.co_name == "run_chunk" and not self.worker_gets:
            configs = getattr(frame.f_locals.get("spec"), "configs", None) or [None]
            self.worker_gets = type(configs[0]).__name__
        n_args = code.co_argcount + code.co_kwonlyargcount
        for name in code.co_varnames[:n_args]:
            value = frame.f_locals.get(name)
            form = self.lab_form(value)
            if form:
                self.lab_hops.setdefault((rel, code.co_qualname), set()).add(form)
            form = wd_carrier(value)
            if form:
                self.wd_hops.setdefault((rel, code.co_qualname), set()).add(form)

    def lab_form(self, value, depth: int = 0) -> str | None:
        """The form in which ``value`` carries the lab's root, or None."""
        if isinstance(value, str | PurePath):
            return type(value).__name__ if str(value) == str(self.lab) else None
        attrs = getattr(value, "__dict__", None)
        root = attrs.get("root") if isinstance(attrs, dict) else None
        if root is not None and str(root) == str(self.lab):
            return type(value).__name__
        if depth == 0 and dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                inner = self.lab_form(getattr(value, f.name), 1)
                if inner:
                    return f"{type(value).__name__}.{f.name}: {inner}"
        return None


def wd_carrier(value, depth: int = 0) -> str | None:
    """The type of the object that holds the sentinel itself, found in ``value``, or None."""
    if isinstance(value, float) and value == WD:
        return "float"
    if isinstance(value, str):
        return "str" if value == str(WD) else None
    if depth > 3 or isinstance(value, type):
        return None
    if isinstance(value, list | tuple):
        if any(isinstance(v, float) and v == WD for v in value):
            return type(value).__name__
        return next((f for v in value[:64] if (f := wd_carrier(v, depth + 1))), None)
    if isinstance(value, dict):
        if value.get("weight_decay") == WD or WD in [v for v in value.values()
                                                    if isinstance(v, float)]:
            return "dict"
        return next((f for v in list(value.values())[:64]
                     if (f := wd_carrier(v, depth + 1))), None)
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict) and not isinstance(value, PurePath):
        if attrs.get("weight_decay") == WD:
            return "config"  # a run config object
        return next((f for k, v in attrs.items() if not k.startswith("_")
                     and (f := wd_carrier(v, depth + 1))), None)
    return None


def _holds_wd(value) -> bool:
    if isinstance(value, float):
        return value == WD
    if isinstance(value, list | tuple):
        return any(_holds_wd(v) for v in value)
    return False


def trace(argv: list[str], lab: Path) -> Tracer:
    import rulelab

    tracer = Tracer(Path(rulelab.__file__).parent.parent, lab)
    sys.setprofile(tracer)
    try:
        run_cli(argv)
    finally:
        sys.setprofile(None)
    return tracer


def walk_line(name: str, t: Tracer) -> str:
    hops = sorted({h for s in t.stacks for h in s})
    files = sorted({f for f, _ in hops})
    touched = sorted({f for f, _ in t.wd_hops})
    carriers = sorted(set().union(*t.wd_hops.values()))
    return (f"{name}: {len(files)} files, {len(hops)} hops, {t.builds} config builds, the "
            f"worker gets a {t.worker_gets}; optimizer reached: {t.optimizer_seen}\n"
            f"    files: {', '.join(files)}\n"
            f"    functions receiving it: {len(t.wd_hops)} in {len(touched)} files, held by "
            f"{', '.join(carriers)}")


def lab_lines(hops: dict[tuple[str, str], set[str]], command: str) -> str:
    """The lab's walk, split where it enters the store's own package (rulelab/store/: the
    destination, whose file primitives take a folder's path)."""
    out = []
    for where, inside in (("to the store", False), ("inside the store", True)):
        part = {h: f for h, f in hops.items()
                if h[0].startswith(os.path.join("rulelab", "store")) == inside}
        files = sorted({f for f, _ in part})
        forms = sorted(set().union(*part.values()))
        out.append(f"lab path ({command}), {where}: {len(files)} files, {len(part)} hops, "
                   f"{len(forms)} forms: {'; '.join(forms)}\n    files: {', '.join(files)}")
        if not inside:
            by_form = {}
            for (f, fn), fs in sorted(part.items()):
                for form in fs:
                    by_form.setdefault(form, []).append(f"{f.removeprefix('rulelab/')}:{fn}")
            out += [f"    {form}: {', '.join(v)}" for form, v in sorted(by_form.items())]
    return "\n".join(out)


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        lab_line = ""
        for study, (task, values) in TINY.items():
            lab = Path(tmp, f"lab-{task}").absolute()
            t = trace(["train", task, *flags(values), "--weight-decay", str(WD), "--quiet",
                       "--lab", str(lab)], lab)
            print(walk_line(f"{study} --weight-decay", t))
            if study == "shortcut-saturation":
                lab_line = lab_lines(t.lab_hops, f"train {task} --lab")
            recipe = Path(tmp, f"{task}.yaml")
            base = ", ".join(f"{k}: {v}" for k, v in {**values, "weight_decay": WD}.items())
            recipe.write_text(f"experiment: walk-{task}\ntask: {task}\nbase: {{{base}}}\n")
            lab = Path(tmp, f"lab-{task}-recipe").absolute()
            t = trace(["sweep", str(recipe), "--quiet", "--lab", str(lab)], lab)
            print(walk_line(f"{study} recipe base.weight_decay", t))
        print(lab_line)


if __name__ == "__main__":
    main()
