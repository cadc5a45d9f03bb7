"""Markdown and HTML in names (issue 34): a markdown image in a file name, column name, group value or a
saved model's ``fit_report.device`` made the browser fetch its URL when shown. Every user-provided
string now reaches Streamlit's Markdown through ``texts.md`` (and plotly through ``texts.plot_text``):
none of them appears raw in any element that renders Markdown, on any page. The real browser's view
(no request to the image's URL, the name shown as typed) is tests/browser/test_markup_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import texts
from dashboard.report_markdown import inline_html

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")

IMAGE = "![x](http://127.0.0.1:9/x.png)"
HTML = "<img src=x onerror=alert(1)>"
HOSTILE = [IMAGE, HTML, "[link](http://127.0.0.1:9/)", "<http://127.0.0.1:9/>", "www.evil.example", ":red[big]",
           "**bold** _it_ `code` $x^2$ ~~s~~ &lt; a@b.example # h", "- item", "1. item", "> quote"]


# ---------------------------------------------------------------------- the helpers themselves
def _unescaped(markdown: str) -> str:
    """What CommonMark shows for text escaped by texts.md: each backslash escape read as its character."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


@pytest.mark.parametrize("name", HOSTILE + ["cifar10_resnet110.npz", "p_cat", "a\\b", "a\nb"])
def test_md_escapes_every_markdown_start_and_shows_the_name_as_typed(name):
    out = texts.md(name)
    assert _unescaped(out) == name.replace("\n", " ")
    assert "![" not in out and "[link](" not in out                    # no image, no link
    assert not re.search(r"(?<!\\)[<`*\[\]|~$&@]", out)               # nothing that makes Markdown bare
    assert not re.search(r"(?<!\\)_(?![A-Za-z0-9])|(?<![A-Za-z0-9\\])_", out)
    assert not re.match(r"\s*([-+=#>]|\d+[.)])", out)                 # no block starts a line
    assert not re.search(r"(?i)(?<![\w.])www\.|(?<!\\):(?=//)|(?<!\\):(?=[\w+\-/]+:)", out)  # no autolink, emoji


def test_md_message_keeps_its_own_markdown_and_lines_but_not_the_messages():
    out = texts.for_the_page(f"{IMAGE}.csv: no label column (label_column=)\n{HTML}")
    assert out.startswith("!\\[x\\](http\\://127.0.0.1:9/x.png).csv: no label column (choose the *Label column* under "
                          "**Columns and reading options**)  \n\\<img src=x onerror=alert(1)>")


def test_the_streamed_upload_lines_name_the_file_as_text():
    assert texts.md(IMAGE) in texts.streaming_upload(IMAGE, None, 10, 100)
    assert texts.md(IMAGE) in texts.streamed_upload_caption(IMAGE, 1000)
    assert IMAGE not in texts.streamed_upload_caption(IMAGE, 1000)


def test_plotly_text_and_the_html_report_show_names_as_text():
    assert texts.plot_text("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    html = inline_html("**Loaded:** " + texts.md(IMAGE) + " " + texts.md(HTML))
    assert html == "<b>Loaded:</b> ![x](http://127.0.0.1:9/x.png) &lt;img src=x onerror=alert(1)&gt;"


# ---------------------------------------------------------------------- every page, under AppTest
MARKDOWN_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")


def _rendered_markdown(at: AppTest) -> list[str]:
    """The Markdown source of every element that renders Markdown, labels and help texts included."""
    parts = [str(e.value) for kind in MARKDOWN_ELEMENTS for e in at.get(kind)]
    parts += [m.label for m in at.metric] + [m.help or "" for m in at.metric]
    for kind in ("selectbox", "multiselect", "radio", "checkbox", "button", "text_input", "number_input", "slider",
                 "expander", "tabs", "toggle"):
        for w in at.get(kind):
            parts += [str(getattr(w, "label", "") or ""), str(getattr(w, "help", "") or "")]
    return parts


def _plotly_texts(at: AppTest) -> list[str]:
    out = []
    for chart in at.get("plotly_chart"):
        fig = pio.from_json(chart.proto.spec)
        out += [str(t.name) for t in fig.data if t.name] + [str(fig.layout.title.text or "")]
        out += [str(a.text) for a in fig.layout.annotations]
        out += [str(t.hovertemplate) for t in fig.data if getattr(t, "hovertemplate", None)]
        for t in fig.data:
            if getattr(t, "type", "") == "bar" and t.x is not None and not isinstance(t.x, dict):
                out += [str(v) for v in t.x]
    return out


def _assert_no_raw_name(at: AppTest, where: str, names=HOSTILE) -> None:
    parts = _rendered_markdown(at)
    for name in names:
        raw = [p for p in parts if name in p.replace(texts.md(name), "")]  # shown, but not as texts.md shows it
        assert not raw, f"{where}: {name!r} reaches Markdown unescaped in {raw[:2]}"
    for text in _plotly_texts(at):
        assert "<img" not in text and "<b>x" not in text, f"{where}: plotly text {text!r}"


@pytest.fixture
def hostile_upload(tmp_path) -> tuple[str, bytes]:
    rng = np.random.default_rng(0)
    n = 600
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.uniform(size=n) < p).astype(int)
    groups = np.array([IMAGE, HTML, "[link](http://127.0.0.1:9/)", "plain"])[np.arange(n) % 4]
    df = pd.DataFrame({"p_positive": p, "label": y, HTML: groups})
    return f"{IMAGE}.csv", df.to_csv(index=False).encode()


def test_a_file_with_markup_in_its_name_columns_and_groups_is_shown_as_text_on_every_page(hostile_upload):
    name, data = hostile_upload
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.file_uploader(key="data_upload").upload(name, data, "text/csv").run()
    assert not at.exception, at.exception
    loaded = at.session_state["pbr_loaded"]
    assert loaded.file_name == name and HTML in list(loaded.preds.metadata.columns)
    shown = "\n".join(_rendered_markdown(at))
    assert texts.md(name) in shown  # the name is on the page, as text
    _assert_no_raw_name(at, "Data page")
    assert any(texts.md(name) in m.value for m in at.sidebar.markdown)
    for page in ("views/reliability.py", "views/bins_bias.py", "views/groups.py", "views/pbr.py", "views/compare.py",
                 "views/generalization.py", "views/apply.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        _assert_no_raw_name(at, page)
    at.switch_page("views/groups.py").run()
    at.selectbox(key="groups_by").set_value(HTML).run()
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["Group"]) >= {IMAGE, HTML}  # tables show the values themselves
    assert any(texts.md(HTML) in m.value for m in at.markdown)      # "grouped by <img ...>", as text
    _assert_no_raw_name(at, "Groups page, grouped by the hostile column")
    legend = [t.name for t in pio.from_json(at.get("plotly_chart")[0].proto.spec).data]
    assert texts.plot_text(HTML) in legend and texts.plot_text(IMAGE) in legend


def test_a_failed_upload_with_markup_in_its_name_is_named_as_text():
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.file_uploader(key="data_upload").upload(f"{HTML}.csv", b"a,b\n1,2\n", "text/csv").run()
    assert not at.exception and at.error
    assert texts.md(HTML) in at.error[0].value
    _assert_no_raw_name(at, "the Data page's error")


def test_a_saved_model_with_markup_in_its_device_and_name_is_described_as_text(tmp_path):
    from pbr_core.recalibrators import get_recalibrator

    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.selectbox(key="data_sample").set_value("cifar10_resnet110.npz").run()
    preds = at.session_state["pbr_loaded"].preds
    doc = get_recalibrator("pbr", max_iter=5, n_mc=5, n_predict_samples=5).fit(preds.subset(np.arange(200))).to_dict()
    doc["state"]["fit_report"]["device"] = IMAGE
    doc["state"]["fit_report"]["warnings"] = [HTML]
    at.switch_page("views/apply.py").run()
    at.file_uploader(key="apply_upload").upload(f"{IMAGE}.json", json.dumps(doc).encode(), "application/json").run()
    assert not at.exception, at.exception
    described = [m.value for m in at.markdown if m.value.startswith("**PBR**")]
    assert described and f"fitted on {texts.md(IMAGE)}" in described[0]
    _assert_no_raw_name(at, "Fit & apply, a saved model")
    # a refused file: the library's message quotes the file's name and values, shown as text
    doc["state"]["kl"] = -1.0
    at.file_uploader(key="apply_upload").upload(f"{HTML}.json", json.dumps(doc).encode(), "application/json").run()
    assert at.error and at.error[0].value.startswith(texts.md(HTML))
    _assert_no_raw_name(at, "Fit & apply, a refused file")
