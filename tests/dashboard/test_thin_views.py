"""Pages are thin (issue 36): the sentences a person reads come from dashboard.texts, not from
string literals on the page, and a page's features read each other's choices through one typed
reader (dashboard.settings_ui), not through the other widgets' session keys.

The check reads the source with :mod:`ast`: a string literal or f-string passed as the text of an
alert, caption, heading or Markdown call, or as a widget's ``help=``, is a sentence written inline.
A control's short label ("Folds", "Run the sweep") is a name, not a sentence, and stays on the page.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dashboard.settings_ui import CompareChoices
from pbr_core.experiments.settings import GroupGapSettings, SweepSettings, method_settings, params_of

ROOT = Path(__file__).resolve().parents[2]
#: Calls whose first argument is text a person reads.
TEXT_CALLS = {"info", "warning", "error", "success", "caption", "markdown", "write", "subheader", "header",
              "title", "toast"}
#: The modules held to it: every page and section (issue 36 counted 79 inline sentences over the 8
#: pages; none is left). A new page joins this list (docs/architecture.md, "A page").
THIN = ["dashboard/views/compare.py", "dashboard/sections/sweep.py", "dashboard/sections/group_gaps.py",
        "dashboard/views/bins_bias.py", "dashboard/views/generalization.py", "dashboard/views/groups.py",
        "dashboard/views/pbr.py", "dashboard/views/data.py", "dashboard/views/reliability.py",
        "dashboard/views/apply.py"]


def inline_sentences(source: str) -> list[str]:
    """``line: text`` of every literal sentence written inline in ``source``."""
    found = []

    def literal(node: ast.AST) -> bool:
        if isinstance(node, ast.BinOp):  # "Some fits failed: " + "; ".join(...), texts.X + " more words"
            return literal(node.left) or literal(node.right)
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and " " in node.value.strip()
        # an f-string with words of its own (one that only joins texts' sentences with a space is none)
        return isinstance(node, ast.JoinedStr) and any(
            isinstance(v, ast.Constant) and str(v.value).strip() for v in node.values)

    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr in TEXT_CALLS and node.args and literal(node.args[0]):
            found.append(f"{node.lineno}: {ast.unparse(node.args[0])[:60]}")
        found += [f"{node.lineno}: help={ast.unparse(k.value)[:60]}" for k in node.keywords
                  if k.arg == "help" and literal(k.value)]
    return found


def test_the_check_finds_inline_sentences() -> None:
    source = ('st.info("Choose at least one method.")\nc[0].caption(f"{n} fits in all")\n'
              'st.number_input("Folds", help="Random splits per n_re.")\nst.info(texts.NO_FIT_FINISHED)\n'
              'st.subheader("Results")\nst.error(f"{problem} {todo}")\nst.warning("Fits failed: " + ", ".join(x))\n')
    assert [line.split(":")[0] for line in inline_sentences(source)] == ["1", "2", "3", "7"]


def test_every_page_and_section_is_held() -> None:
    """No page escapes the check: THIN lists every view and section (app.PAGES runs the views)."""
    on_disk = {p.relative_to(ROOT).as_posix() for folder in ("dashboard/views", "dashboard/sections")
               for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py"}
    assert on_disk == set(THIN)


@pytest.mark.parametrize("path", THIN)
def test_thin_pages_write_no_sentence_inline(path: str) -> None:
    found = inline_sentences((ROOT / path).read_text(encoding="utf-8"))
    assert not found, f"{path} writes sentences inline (move them to dashboard/texts.py): {found}"


@pytest.mark.parametrize("path", ["dashboard/sections/sweep.py", "dashboard/sections/group_gaps.py"])
def test_sections_read_the_comparison_through_its_choices(path: str) -> None:
    """No section reads the comparison's widgets' session keys: CompareChoices does, once."""
    source = (ROOT / path).read_text(encoding="utf-8")
    for key in ("cmp_", "K_N_RE", "K_SEED", "K_ALPHA", "K_MAX_ITER", "K_METHODS"):
        assert key not in source, f"{path} reads the comparison's {key} itself"


def test_compare_choices_read_the_session_with_the_pages_defaults() -> None:
    available = ["temperature", "vector_scaling", "pbr"]
    fresh = CompareChoices.read({}, available, 600)
    assert fresh == CompareChoices(methods=(), n_re=599, seed=0, alpha=0.5, max_iter=None)
    session = {"cmp_methods": ["pbr", "gone", "vector_scaling"], "cmp_n_re": 300, "cmp_seed": 4,
               "cmp_alpha": 0.2, "cmp_max_iter": 0}
    c = CompareChoices.read(session, available, 10_000)
    assert c == CompareChoices(methods=("pbr", "vector_scaling"), n_re=300, seed=4, alpha=0.2, max_iter=None)
    c = CompareChoices.read({**session, "cmp_max_iter": 60}, available, 10_000)
    # what the page built inline before (views/compare.py at 2642f71), field for field
    assert c.sweep([250, 50], 3, "positive") == SweepSettings(
        methods=("pbr", "vector_scaling"), n_re_values=(50, 250), n_folds=3, seed=4, binary_ece="positive",
        params=params_of({m: method_settings(m, 0.2, 60) for m in ("pbr", "vector_scaling")}))
    assert c.group_gaps("pbr", "segment", 5, "top_label") == GroupGapSettings(
        method="pbr", by=("segment",), n_re=300, n_folds=5, seed=4, binary_ece="top_label",
        params=tuple(sorted(method_settings("pbr", 0.2, 60).items())))
