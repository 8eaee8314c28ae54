"""The code version recorded with every run (DESIGN §3).

``code_version()`` is ``"<rulelab version>+g<short sha>"``, with ``-dirty`` appended when tracked
files of the source checkout have uncommitted changes (the ``git describe --dirty`` rule:
untracked files do not count), or ``"<version>+unknown"`` when the package does not run from a
git checkout or git is unavailable.
"""

from __future__ import annotations

import functools
import os
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

_GIT_TIMEOUT_S = 5.0
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def package_version() -> str:
    try:
        return version("rulelab")
    except PackageNotFoundError:
        return "0.0.0"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Version of the running code, computed once per process."""
    return describe(_PACKAGE_DIR, package_version())


def describe(src_dir: Path, base: str) -> str:
    """``base`` plus the git state of the checkout holding ``src_dir`` (uncached)."""
    sha = _git(src_dir, "rev-parse", "--short", "HEAD")
    # A non-editable install inside a checkout (e.g. a venv under the repo) is ignored by git:
    # its HEAD says nothing about the installed code.
    if sha is None or _git(src_dir, "check-ignore", "-q", str(src_dir)) is not None:
        return f"{base}+unknown"
    status = _git(src_dir, "status", "--porcelain", "--untracked-files=no")
    if status is None:
        return f"{base}+unknown"
    return f"{base}+g{sha}" + ("-dirty" if status else "")


def _git(cwd: Path, *args: str) -> str | None:
    """stdout of ``git -C cwd args`` stripped, or None on any failure (incl. non-zero exit)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None
