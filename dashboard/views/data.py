"""Data page: pick a bundled sample or upload a prediction file, see what was loaded.

Widgets only *request* a load (callbacks -> state.request_*); app.py performs it at the start of
the next run. A failed load keeps the previous data and shows an error box here.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state, tables, texts
from pbr_core.loading import template_csv

K_SAMPLE = "data_sample"
K_UPLOAD = "data_upload"
K_LABEL = "data_label_column"
K_INPUT = "data_input_type"
K_RENORM = "data_renormalize"
K_MAXROWS = "data_max_rows"

TEMPLATES = [  # (kind for pbr_core.template_csv, button label, file name)
    ("multiclass", "Multiclass", "template_multiclass.csv"),
    ("binary", "Binary", "template_binary.csv"),
    ("top_label", "Top-label only", "template_top_label.csv"),
]


def _options() -> state.LoadOptions:
    ss = st.session_state
    max_rows = int(ss.get(K_MAXROWS) or 0)
    return state.LoadOptions(
        label_column=(ss.get(K_LABEL) or "").strip() or None,
        input_type=ss.get(K_INPUT, "auto"),
        renormalize=bool(ss.get(K_RENORM, False)),
        max_rows=max_rows or None,
    )


def _on_sample() -> None:
    name = st.session_state.get(K_SAMPLE)
    if name:
        state.request_sample(name, _options())


def _on_upload() -> None:
    f = st.session_state.get(K_UPLOAD)
    if f is None:  # the user removed the file: keep the data, drop a stale error about it
        state.clear_error()
        return
    state.request_upload(f.name, f.getvalue(), _options())


def _on_options() -> None:
    """Re-read what the options are meant for: a failed or current upload, else the current sample."""
    f = st.session_state.get(K_UPLOAD)
    err = state.last_error()
    cur = state.current()
    if f is not None and ((err and err["file_name"] == f.name) or (cur and cur.origin == "upload")):
        state.request_upload(f.name, f.getvalue(), _options())
    elif cur is not None and cur.origin == "sample":
        state.request_sample(cur.file_name, _options())


def _source_controls(cur: state.Loaded | None) -> None:
    left, right = st.columns(2, gap="large")
    with left:
        st.subheader("Bundled samples")
        samples = state.list_samples()
        # Mirror what is loaded, so the box never claims a sample that is not in use.
        st.session_state[K_SAMPLE] = cur.file_name if cur and cur.origin == "sample" else None
        st.selectbox(
            "Real prediction files shipped with pbr-calib", samples, key=K_SAMPLE,
            format_func=state.describe_sample, on_change=_on_sample, placeholder="Choose a sample",
            help="Test-set predictions of real models (see sample_data/SOURCES.md for origin and license).",
        )
        st.caption(f"{len(samples)} files in sample_data/; their origin and license are in "
                   "sample_data/SOURCES.md.")
    with right:
        st.subheader("Your file")
        st.file_uploader(
            "Upload predictions (CSV, TSV, CSV.GZ, Parquet, NPZ, NPY)", type=state.UPLOAD_TYPES,
            key=K_UPLOAD, on_change=_on_upload,
            help="One column per class (probabilities or logits) plus a label column; or one p(y=1) "
                 "column plus a 0/1 label; or confidence, predicted label and true label. "
                 "Download a template below to see the layout.",
        )
        with st.expander("Reading options", expanded=False):
            st.text_input("Label column (leave empty to detect)", key=K_LABEL, on_change=_on_options,
                          persist_state="session",
                          help="Name of the column that holds the true labels, if it is not detected.")
            st.selectbox("The score columns hold", ["auto", "probabilities", "logits"], key=K_INPUT,
                         on_change=_on_options, persist_state="session",
                         help="'auto' decides by inspection: values in [0, 1] with rows summing to 1 "
                              "are probabilities, anything else logits. The summary says what was chosen.")
            st.checkbox("Renormalise rows that do not sum to 1", key=K_RENORM, on_change=_on_options,
                        persist_state="session",
                        help="Off: such rows are an error that names the row. On: each row is divided by "
                             "its sum (only do this if you know why the rows are off).")
            st.number_input("Row limit (0 = no limit)", min_value=0, step=100_000,
                            key=K_MAXROWS, on_change=_on_options, persist_state="session",
                            help="Refuse files with more rows than this, with a message, instead of "
                                 "reading them (the check comes before the data is parsed). Useful on a "
                                 "shared server; to analyse a huge file, upload a random sample of its rows.")
        _templates()


def _templates() -> None:
    st.caption("Download a template: a small example file in each accepted layout.")
    cols = st.columns(len(TEMPLATES))
    for col, (kind, label, file_name) in zip(cols, TEMPLATES):
        with col:
            st.download_button(label, data=template_csv(kind), file_name=file_name, mime="text/csv",
                               key=f"template_{kind}", icon=":material/download:", on_click="ignore")


def _error_box(cur: state.Loaded | None) -> None:
    err = state.last_error()
    if not err:
        return
    msg = err["message"]
    hints = []
    if "renormalis" in msg or "sum to" in msg:
        hints.append(texts.RENORMALISE_HINT)
    if "label column" in msg.lower():
        hints.append(texts.LABEL_HINT)
    kept = f"The data loaded before (**{cur.name}**) is still in use." if cur else ""
    body = "\n\n".join([f"Could not load **{err['file_name']}**: {msg}", *hints, kept])
    st.error(body.strip(), icon=":material/error:")


def _summary(cur: state.Loaded) -> None:
    p = cur.preds
    st.subheader(f"Loaded: {cur.name}")
    c = st.columns(4)
    c[0].metric("Rows (n)", f"{p.n:,}", help="Number of predictions (test examples).")
    c[1].metric("Classes (K)", state.classes_label(p), help="Number of classes the model chooses from.")
    c[2].metric("Accuracy", f"{p.accuracy:.2%}", help="Share of rows where the predicted class is the true class.")
    c[3].metric("Kind", state.kind_label(p),
                help="multiclass: full probability vectors; binary: p(y=1) and a 0/1 label; "
                     "top-label: only confidence, predicted and true label (enough for ECE, not for recalibration).")
    # Logits or probabilities: a sentence, not a card (the word does not fit a card's large font).
    scores = ("logits (turned into probabilities with a softmax)" if p.input_type == "logits"
              else "probabilities")
    st.markdown(f"The score columns were read as **{scores}**.")
    if p.notes:
        st.info("**What the loader decided**\n\n" + "\n".join(f"* {n}" for n in p.notes),
                icon=":material/info:")
    st.markdown("**First rows, as read**")
    st.dataframe(tables.preview_frame(p), hide_index=True)
    if p.probs is not None and p.n_classes > tables.MAX_PREVIEW_CLASSES and p.kind != "binary":
        st.caption(f"Showing {tables.MAX_PREVIEW_CLASSES} of {p.n_classes} class columns.")


def render() -> None:
    st.title("Data")
    st.markdown(
        "Load the predictions of a classifier on a test set: a bundled sample or your own file. "
        "The other pages then show how well calibrated the model is."
    )
    cur = state.current()
    _error_box(cur)
    _source_controls(cur)
    st.divider()
    if cur is None:
        st.info("Nothing is loaded yet.")
        return
    _summary(cur)


render()
