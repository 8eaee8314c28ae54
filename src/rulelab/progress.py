"""A rich progress bar for ensemble training: epochs, members generalized (val and adv
accuracy both 100% at one evaluation, SPEC S.3), failures, ETA."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from rulelab.train.runner import Progress as ProgressCallbacks


class RichProgress(ProgressCallbacks):
    """One bar per ensemble: ``2L·2H × 16  ━━━━  1200/2000 epochs  gen 5/16  0:01:10 < 0:00:47``."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._bar: Progress | None = None
        self._task = None
        self._n = 0

    def start(self, label: str, total_epochs: int, done_epochs: int, n_members: int) -> None:
        self._n = n_members
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("epochs"),
            TextColumn("[green]gen {task.fields[gen]}[/] [red]{task.fields[fail]}[/]"),
            TimeElapsedColumn(),
            TextColumn("<"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(
            label, total=total_epochs, completed=done_epochs, gen=f"0/{n_members}", fail=""
        )

    def update(self, epoch: int, n_generalized: int, n_failed: int) -> None:
        if self._bar is None:
            return
        fail = f"failed {n_failed}" if n_failed else ""
        self._bar.update(self._task, completed=epoch, gen=f"{n_generalized}/{self._n}", fail=fail)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
