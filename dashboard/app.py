"""Entry point of the dashboard: ``streamlit run dashboard/app.py``.

This file is the frame around every page (st.navigation): it sets the page config, loads the
default sample on first start, carries out a load requested by the Data page, draws the sidebar
summary of what is loaded and runs the selected page.

To add a page, add a file under ``views/`` and one row
to ``PAGES``; sections become headings in the sidebar menu. (Not ``pages/``: see dashboard/__init__.py.)
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

# `streamlit run dashboard/app.py` puts dashboard/ on sys.path, not the repository root; the pages
# import `dashboard.*`, so the root must be importable however the app is started.
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402
from streamlit.navigation.page import StreamlitPage  # noqa: E402

from dashboard import memory, serving, sessions, state, texts  # noqa: E402
from pbr_core.metrics import BINARY_TARGET  # noqa: E402

logger = logging.getLogger("dashboard.app")

#: (section, page file relative to this file, title, icon, url path)
PAGES: list[tuple[str, str, str, str, str]] = [
    ("Calibration", "views/data.py", "Data", ":material/upload_file:", "data"),
    ("Calibration", "views/reliability.py", "Reliability", ":material/bar_chart:", "reliability"),
    ("Calibration", "views/bins_bias.py", "Bins & bias", ":material/tune:", "bins"),
    ("Calibration", "views/groups.py", "Groups", ":material/groups:", "groups"),
    ("Recalibration", "views/pbr.py", "PBR", ":material/auto_fix_high:", "pbr"),
    ("Recalibration", "views/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    ("Recalibration", "views/generalization.py", "Generalization", ":material/scatter_plot:", "generalization"),
    ("Recalibration", "views/apply.py", "Fit & apply", ":material/ios_share:", "apply"),
]


def _navigation() -> StreamlitPage:
    sections: dict[str, list] = {}
    for i, (section, path, title, icon, url) in enumerate(PAGES):
        sections.setdefault(section, []).append(
            st.Page(path, title=title, icon=icon, url_path=url, default=(i == 0))
        )
    return st.navigation(sections)


def _sidebar() -> None:
    loaded = state.current()
    with st.sidebar:
        st.markdown("### Loaded data")
        if loaded is None:
            st.info("Nothing loaded yet: choose a sample or upload a file on the Data page.")
            return
        p = loaded.preds
        st.markdown(f"**{texts.md(loaded.name)}**")
        n = loaded.stream.n_total if loaded.stream is not None else p.n
        st.markdown(
            f"n = **{n:,}** rows · K = **{state.classes_label(p)}**  \n"
            f"kind: **{state.kind_label(p)}** · {'logits' if p.input_type == 'logits' else 'probabilities'}"
        )
        if loaded.stream is not None and loaded.origin == "upload":  # too large for memory: read in a stream
            st.caption(texts.streamed_upload_caption(loaded.file_name, p.n))
        elif loaded.stream is not None:
            st.caption(f"Dataset on the server: {texts.md(loaded.stream.path)} ({loaded.stream.n_files:,} file(s)); "
                       f"pages that need rows in memory use a random sample of {p.n:,} rows.")
        elif loaded.origin == "upload":
            st.caption(f"Uploaded file: {texts.md(loaded.file_name)}")
        else:
            st.caption(f"Bundled sample: sample_data/{texts.md(loaded.file_name)}")
        if p.kind == "binary":
            # Lives in the frame (not a page) so the choice holds on every page.
            st.radio(
                "Measure calibration of", list(BINARY_TARGET.values),
                format_func=texts.BINARY_TARGET_LABELS.get, key=state.BINARY_TARGET_KEY,
                index=list(BINARY_TARGET.values).index(BINARY_TARGET.default),
                help=texts.BINARY_TARGET_HELP,
            )


def _refuse_unsafe_serving() -> None:
    """Stop the run, with a message, when the safety settings did not take effect (started without
    the project's config file) or the request names a host the dashboard is not served under (DNS
    rebinding): dashboard/serving.py says why."""
    from streamlit import config

    unsafe = serving.unsafe_settings()
    if unsafe:
        logger.error("pbr-calib refuses to serve: settings left at Streamlit's default: %s (start it with the "
                     "project's .streamlit/config.toml; README, Serving)", ", ".join(unsafe))
        st.error(texts.serving_unsafe(unsafe), icon=":material/gpp_bad:")
        st.stop()
    headers = st.context.headers
    if not serving.host_allowed(headers, config.get_option("server.address")):
        host = headers.get("Host", "")
        logger.warning("refused a request for host %r (not a name this dashboard is served under)", host)
        st.error(texts.HOST_REFUSED.format(host=texts.md(host)), icon=":material/gpp_bad:")
        st.stop()


def main() -> None:
    st.set_page_config(page_title="pbr-calib", page_icon=":material/straighten:", layout="wide")
    _refuse_unsafe_serving()
    memory.configure()  # once per process
    sessions.track()    # this session's data is released when its tab is gone (see sessions.py)
    state.process_pending()
    state.ensure_loaded()
    nav = _navigation()
    _sidebar()
    nav.run()


main()
