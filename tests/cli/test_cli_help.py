"""Help that cannot rot (issue 10): every option of every command has help, and what a user
reads — help texts and messages — cites only documents that ship with the repository.

The command tree is walked from :func:`rulelab.cli.app.build_app`, so a flag added to any
study's config or to any command is checked without touching this file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer

from rulelab.cli.app import build_app

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "rulelab"
# "(docs/methods.md § S.4.1–2)", "docs/methods.md § M.2–M.3"
CITATION = re.compile(r"(docs/[\w./-]+\.md) § ([SM](?:\.\d+)+(?:–(?:[SM]\.)?[\d.]+)?)")
UNSHIPPED = re.compile(r"\b(SPEC|DESIGN)(\.md)?\b")


def commands():
    """(command path, click command) for every node of the tree, groups included."""
    def walk(cmd, path):
        yield path, cmd
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            yield from walk(sub, (*path, name))
    yield from walk(typer.main.get_command(build_app()), ("rulelab",))


def help_texts() -> list[tuple[str, str]]:
    """(where, text) of every command's and every parameter's help."""
    out = []
    for path, cmd in commands():
        out.append((" ".join(path), cmd.help or ""))
        for p in cmd.params:
            out.append((f"{' '.join(path)} {'/'.join(p.opts)}", getattr(p, "help", "") or ""))
    return out


def test_every_option_of_every_command_has_help():
    missing, n_params, leaves = [], 0, 0
    for path, cmd in commands():
        if not (cmd.help or "").strip():
            missing.append(" ".join(path))
        leaves += not getattr(cmd, "commands", None)
        for p in cmd.params:
            n_params += 1
            if not (getattr(p, "help", None) or "").strip():
                missing.append(f"{' '.join(path)} {'/'.join(p.opts)}")
    assert missing == []
    # the walk saw the whole tree: train/data per task, an analyze per analysis, …
    names = {" ".join(path) for path, _ in commands()}
    assert {"rulelab train mpsp", "rulelab train digits", "rulelab analyze gradients",
            "rulelab analyze dd", "rulelab reproduce coexistence", "rulelab sweep",
            "rulelab runs", "rulelab status", "rulelab report"} <= names
    assert leaves >= 20 and n_params >= 200


def section_ids(doc: Path) -> set[str]:
    """The section numbers of a document's headings (``### S.4.3 Activation ablation``)."""
    return set(re.findall(r"^#+ ([SM](?:\.\d+)+) ", doc.read_text(), flags=re.M))


def cited_ids(ref: str) -> list[str]:
    """``S.4.1–2`` → S.4.1, S.4.2; ``M.2–M.3`` → M.2, M.3; ``M.4.7`` → M.4.7."""
    first, _, last = ref.partition("–")
    if not last:
        return [first]
    if not last[0].isalpha():
        last = first.rsplit(".", last.count(".") + 1)[0] + "." + last
    return [first, last]


def test_help_cites_only_documents_in_the_repository():
    cited = 0
    for where, text in help_texts():
        text = " ".join(text.split())  # help wraps lines anywhere
        assert not UNSHIPPED.search(text), f"{where} cites a document not in the repo: {text}"
        for doc, ref in CITATION.findall(text):
            path = ROOT / doc
            assert path.is_file(), f"{where} cites {doc}, which does not exist"
            for sid in cited_ids(ref):
                assert sid in section_ids(path), f"{where} cites {doc} § {sid}: no such section"
                cited += 1
        for doc in re.findall(r"docs/[\w./-]+\.md", text):  # cited with a section or not
            assert (ROOT / doc).is_file(), f"{where} names {doc}, which does not exist"
    assert cited >= 12  # every analysis and the study-M tasks cite their method section


def test_cited_ids_expand_ranges():
    assert cited_ids("S.4.1–2") == ["S.4.1", "S.4.2"]
    assert cited_ids("M.2–M.3") == ["M.2", "M.3"]
    assert cited_ids("M.4.7") == ["M.4.7"]


def user_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings: messages, help, HTML text."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docstrings]


def test_user_facing_strings_cite_no_unshipped_document():
    """Docstrings may cite the project brief (it is where the code's choices come from); what
    a user reads — errors, help, report text — may not."""
    found = [f"{p.relative_to(ROOT)}:{line}: {text[:80]!r}"
             for p in sorted(SRC.rglob("*.py")) for line, text in user_strings(p)
             if UNSHIPPED.search(text)]
    assert found == []


def test_hints_name_real_install_commands():
    """rulelab is not on a package index: ``pip install 'rulelab[…]'`` cannot work."""
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted(SRC.rglob("*.py"))
             for line, text in user_strings(p) if re.search(r"pip install '?rulelab\[", text)]
    assert found == []


def test_analyze_help_groups_the_analyses_by_study():
    from rulelab.study_registry import studies

    (analyze,) = [cmd for path, cmd in commands() if path == ("rulelab", "analyze")]
    text = " ".join(analyze.help.split())
    for study in studies():
        if study.analyses:
            names = ", ".join(a.name for a in study.analyses)
            assert f"{study.name}: {names}" in text, text
