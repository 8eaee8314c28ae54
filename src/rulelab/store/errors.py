"""The one exception the store raises, and what lab I/O failures mean (DESIGN §3).

Every problem with a lab directory (missing lab, corrupt registry, corrupt metrics or checkpoint
file, a read-only lab, a full disk) surfaces as a :class:`StoreError` whose text is a single
line naming the file and what to do, so the CLI can print it as is. :func:`write_errors`
translates the operating system's reasons (no space, read-only) found anywhere in an
exception's chain: torch and pyarrow wrap the ``OSError`` they hit in their own exceptions.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
LOW_SPACE_BYTES = 1 << 20  # below this, an unexplained I/O error is read as a full disk


class StoreError(Exception):
    """A lab-directory problem, reported as one line that names the offending path."""

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


def first_line(err: BaseException) -> str:
    """A short, single-line description of ``err`` for embedding in a :class:`StoreError`."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def no_space(path: str | Path) -> StoreError:
    return StoreError(f"no space left on device writing {path}; free space and re-run: "
                      "finished runs are kept and unfinished ones resume")


def read_only(root: str | Path | None, path: str | Path | None = None) -> StoreError:
    what = f"lab {root} is read-only" if root else f"cannot write {path}: the lab is read-only"
    return StoreError(f"{what}; reading commands work, to train use a writable --lab")


def os_errnos(err: BaseException) -> list[int]:
    """``errno`` of every ``OSError`` in ``err``'s cause/context chain, outermost first."""
    out, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno is not None:
            out.append(err.errno)
        err = err.__cause__ or err.__context__
    return out


def low_on_space(path: str | Path) -> bool:
    """Whether the filesystem holding ``path`` (or its nearest existing parent) is all but
    full."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free < LOW_SPACE_BYTES
    except OSError:
        return False


def explain_write_error(err: BaseException, path: str | Path,
                        root: str | Path | None = None) -> StoreError | None:
    """A :class:`StoreError` saying what is wrong when writing ``path`` failed because the
    disk is full or the lab is read-only; None for any other failure (a bug, bad data)."""
    codes = os_errnos(err)
    if any(c in NO_SPACE for c in codes):
        return no_space(path)
    if any(c in READ_ONLY for c in codes):
        return read_only(root, path)
    if codes and low_on_space(path):  # EIO and friends on a full filesystem
        return no_space(path)
    return None


@contextlib.contextmanager
def write_errors(path: str | Path, root: str | Path | None = None) -> Iterator[None]:
    """Turn a full disk or a read-only lab met while writing ``path`` into one clear line."""
    try:
        yield
    except StoreError:
        raise
    except Exception as err:
        explained = explain_write_error(err, path, root)
        if explained is None:
            raise
        raise explained from None
