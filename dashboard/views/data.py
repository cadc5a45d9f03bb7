"""Data page: pick a bundled sample or upload a prediction file, say which column is what, see what
was loaded.

Widgets only *request* a load (callbacks -> state.request_*); app.py performs it at the start of
the next run. A failed load keeps the previous data and shows an error box here.

The uploader's position in the page never changes between runs (the error box is drawn below it):
a widget whose position shifts is re-created by the browser, and a file being uploaded into the
old one is lost. That was how a corrected file chosen right after a failed one got ignored: the
removal of the failed file cleared the error box above the uploader, the uploader moved up, and
the new upload vanished with the old widget.
"""

from __future__ import annotations

import re

import streamlit as st

from dashboard import state, tables, texts
from pbr_core.loading import ONE_CLASS_NOTE, template_csv
from pbr_core.predictions import LOG_ODDS_NOTE

K_SAMPLE = "data_sample"
K_UPLOAD = "data_upload"
K_LABEL = "data_label_column"
K_SCORES = "data_score_columns"
K_GROUPS = "data_group_columns"
K_IGNORE = "data_ignore_columns"
K_INPUT = "data_input_type"
K_RENORM = "data_renormalize"
K_PERCENT = "data_percent"
K_POSITIVE = "data_positive_class"
K_MAXROWS = "data_max_rows"
K_OPTIONS_FOR = "data_options_for"    # which file the option widgets currently describe
K_MAP_SCORE = "data_map_score"
K_MAP_LABEL = "data_map_label"
K_MAP_SHARE = "data_map_share"
K_MAP_METHOD = "data_map_method"
K_MAP_FOR = "data_map_for"            # which file the map's column choices describe
K_MAP_ASK = "data_map_ask"            # the button was pressed with a box empty
K_MAP_NOTE = "data_map_note"          # why a map column is left to choose, or none can be (texts.MapNote)
MAP_METHODS = {"isotonic": "Isotonic regression (steps; suits few distinct scores)",
               "logistic": "Logistic curve (smooth; suits margins)"}
K_SEEN_UPLOAD = "data_seen_upload"    # file_id of the last upload handed to the loader
K_SERVER_PATH = "data_server_path"
K_SERVER_OPEN = "data_server_open"

DETECT = "(find it by name)"
FILE_SAYS = "(choose)"
INPUT_TYPES = {"auto": "detect (auto)", "probabilities": "probabilities", "logits": "logits"}

TEMPLATES = [  # (kind for pbr_core.template_csv, button label, file name)
    ("multiclass", "Multiclass", "template_multiclass.csv"),
    ("binary", "Binary", "template_binary.csv"),
    ("top_label", "Top-label only", "template_top_label.csv"),
]


# --------------------------------------------------------------------------- what the options are for
def _target(cur: state.Loaded | None) -> tuple[str, list[str], state.LoadOptions] | None:
    """(key, columns, options in use) of the file the reading options apply to: a failed upload
    that is still in the uploader, else the loaded file."""
    err = state.last_error()
    f = st.session_state.get(K_UPLOAD)
    if err and f is not None and err["file_name"] == f.name:
        return f"failed:{f.file_id}", list(err.get("columns") or []), err.get("options") or state.LoadOptions()
    if cur is None:
        return None
    return cur.key, [c for c, _ in cur.preds.column_roles], cur.options


def _class_choice(target: tuple[str, list[str], state.LoadOptions] | None,
                  cur: state.Loaded | None) -> tuple[str, tuple[str, str], str] | None:
    """(label column, its two names, score column) where the user must say which name the one score
    column is the probability of: the file that failed for not saying it (the loader's
    ``undecided_classes``), or the loaded file read with such a choice (to change it); else None
    (the file says it: no control)."""
    if target is None:
        return None
    if target[0].startswith("failed:"):
        classes = (state.last_error() or {}).get("classes")
        return tuple(classes) if classes else None
    if cur is None or not cur.options.positive_class or cur.preds.kind != "binary" or not cur.preds.class_names:
        return None
    roles = dict(cur.preds.column_roles)
    label = next((c for c, r in roles.items() if r == "label"), None)
    score = next((c for c, r in roles.items() if r == "score"), None)
    return (label, tuple(cur.preds.class_names), score) if label and score else None


def _sync_widgets(target: tuple[str, list[str], state.LoadOptions] | None) -> list[str]:
    """Set the option widgets to the options of the file they now describe; returns its columns."""
    if target is None:
        return []
    key, columns, opts = target
    # Also when the widgets' values were dropped (Streamlit forgets a widget while another page shows).
    state.reset_for_data(K_OPTIONS_FOR, key, lambda: {
        K_LABEL: opts.label_column if opts.label_column in columns else DETECT,
        K_SCORES: [c for c in opts.score_columns if c in columns],
        K_GROUPS: [c for c in opts.group_columns if c in columns],
        K_IGNORE: [c for c in opts.ignore_columns if c in columns],
        K_INPUT: opts.input_type,
        K_RENORM: opts.renormalize,
        K_PERCENT: opts.percent,
        K_POSITIVE: opts.positive_class or FILE_SAYS,
        K_MAXROWS: int(opts.max_rows or 0),
    }, also=K_LABEL not in st.session_state)
    return columns


def _options() -> state.LoadOptions:
    ss = st.session_state
    label = ss.get(K_LABEL)
    return state.LoadOptions(
        label_column=None if label in (None, DETECT) else label,
        input_type=ss.get(K_INPUT, "auto"),
        renormalize=bool(ss.get(K_RENORM, False)),
        percent=bool(ss.get(K_PERCENT, False)),
        positive_class=None if ss.get(K_POSITIVE) in (None, FILE_SAYS) else str(ss.get(K_POSITIVE)),
        max_rows=int(ss.get(K_MAXROWS) or 0) or None,
        score_columns=tuple(ss.get(K_SCORES) or ()),
        group_columns=tuple(ss.get(K_GROUPS) or ()),
        ignore_columns=tuple(ss.get(K_IGNORE) or ()),
    )


# --------------------------------------------------------------------------- callbacks
def _fresh_options() -> state.LoadOptions:
    """Options for another file: its own columns and values are detected; only the row limit (a
    safety setting of the session) carries over."""
    return state.LoadOptions(max_rows=int(st.session_state.get(K_MAXROWS) or 0) or None)


def _on_sample() -> None:
    name = st.session_state.get(K_SAMPLE)
    if name:
        state.request_sample(name, _fresh_options())


def _take_upload() -> bool:
    """Hand a newly chosen file to the loader, once per file (uploads are known by their file_id);
    True when a load was requested."""
    f = st.session_state.get(K_UPLOAD)
    if f is None:
        return False  # the user removed the file: keep the data (and the message about a failed file)
    if st.session_state.get(K_SEEN_UPLOAD) == f.file_id:
        return False
    st.session_state[K_SEEN_UPLOAD] = f.file_id
    state.request_upload(f.name, f.getvalue(), _fresh_options())
    return True


def _on_apply(options: state.LoadOptions | None = None) -> None:
    """Re-read what the options are meant for: a failed or current upload, else the current sample."""
    options = options or _options()
    f = st.session_state.get(K_UPLOAD)
    err = state.last_error()
    cur = state.current()
    if f is not None and ((err and err["file_name"] == f.name) or (cur and cur.origin == "upload")):
        state.request_upload(f.name, f.getvalue(), options)
    elif cur is not None and cur.origin == "sample":
        state.request_sample(cur.file_name, options)
    elif cur is not None and cur.origin == "server":
        state.request_server(cur.file_name, options)


def _on_map() -> None:
    """Read the file again as scores to map to probabilities (pbr_core.scores.map_scores); a box left
    empty is asked for instead (reading without the map would load the file as it was)."""
    ss = st.session_state
    ss[K_MAP_ASK] = ss.get(K_MAP_SCORE) is None or ss.get(K_MAP_LABEL) is None
    if ss[K_MAP_ASK]:
        return
    _on_apply(state.LoadOptions(label_column=ss.get(K_MAP_LABEL), map_scores_column=ss.get(K_MAP_SCORE),
                                map_share=int(ss.get(K_MAP_SHARE, 30)) / 100, map_method=ss.get(K_MAP_METHOD, "isotonic"),
                                max_rows=int(ss.get(K_MAXROWS) or 0) or None))


# --------------------------------------------------------------------------- page parts
def _source_controls(cur: state.Loaded | None) -> None:
    left, right = st.columns(2, gap="large")
    with left:
        st.subheader(texts.BUNDLED_SAMPLES_TITLE)
        samples = state.list_samples()
        # Mirror what is loaded, so the box never claims a sample that is not in use.
        st.session_state[K_SAMPLE] = cur.file_name if cur and cur.origin == "sample" else None
        st.selectbox(
            "Real prediction files shipped with pbr-calib", samples, key=K_SAMPLE,
            format_func=state.describe_sample, on_change=_on_sample, placeholder="Choose a sample",
            help=texts.samples_help(state.sample_folder()),
        )
        st.caption(texts.samples_caption(len(samples), state.sample_folder()))
        _templates()
    with right:
        st.subheader(texts.YOUR_FILE_TITLE)
        st.file_uploader(
            "Upload predictions (CSV, TSV, CSV.GZ, Excel, Parquet, JSON, JSONL, NPZ, NPY)", type=state.UPLOAD_TYPES,
            key=K_UPLOAD, on_change=_take_upload, help=texts.UPLOAD_HELP,
        )
        if _take_upload():  # a file the callback did not see (reruns merged by the browser)
            st.rerun()
        _error_box(cur)


def _on_server() -> None:
    st.session_state[K_SERVER_OPEN] = True  # keep the section open to show the outcome
    state.request_server(str(st.session_state.get(K_SERVER_PATH) or ""), _fresh_options())


def _server_source(cur: state.Loaded | None) -> None:
    """A dataset on the server, offered only when the operator configured a data folder."""
    root = state.server_root()
    if root is None:
        return
    opened = (bool(st.session_state.get(K_SERVER_OPEN)) or (cur is not None and cur.origin == "server")
              or state.read_stopped() is not None)
    with st.expander("Dataset on the server (files over the upload limit)", expanded=opened):
        st.markdown(texts.SERVER_DATA_INTRO)
        st.caption(texts.server_folder_caption(root.name))
        stopped = state.read_stopped()
        if stopped:
            st.info(texts.read_stopped_note(stopped, state.shown_at_start(cur)), icon=":material/stop_circle:")
        with st.form("data_server_form", border=False):
            c = st.columns([4, 1], vertical_alignment="bottom")
            c[0].text_input("Path inside the data folder", key=K_SERVER_PATH, placeholder="logs/*.parquet")
            c[1].form_submit_button("Read", on_click=_on_server, icon=":material/dataset:", key="data_server_read")


def _reading_options(cur: state.Loaded | None) -> None:
    target = _target(cur)
    columns = _sync_widgets(target)
    is_failed = target is not None and target[0].startswith("failed:")
    title = "Columns and reading options" + (" (for the file that failed)" if is_failed else "")
    with st.expander(title, expanded=is_failed and bool(columns)):
        if target is None:
            st.caption(texts.LOAD_FIRST)
            return
        with st.form("data_options_form", border=False):
            if columns:
                st.markdown(texts.COLUMN_ROLES_INTRO)
                c = st.columns(2, gap="medium")
                c[0].selectbox("Label column (the true class)", [DETECT, *columns], key=K_LABEL,
                               help=texts.LABEL_COLUMN_HELP)
                c[1].multiselect("Score columns, in class order (empty: detect)", columns, key=K_SCORES,
                                 help=texts.SCORE_COLUMNS_HELP)
                c = st.columns(2, gap="medium")
                c[0].multiselect("Group columns (kept to compare groups)", columns, key=K_GROUPS,
                                 help=texts.GROUP_COLUMNS_HELP)
                c[1].multiselect("Columns to ignore", columns, key=K_IGNORE, help=texts.IGNORE_COLUMNS_HELP)
                _positive_class_control(_class_choice(target, cur))
            c = st.columns(3, gap="medium")
            c[0].selectbox("The score columns hold", list(INPUT_TYPES), format_func=INPUT_TYPES.get, key=K_INPUT,
                           help=texts.INPUT_TYPE_HELP)
            c[1].number_input("Row limit (0 = no limit)", min_value=0, step=100_000, key=K_MAXROWS,
                              help=texts.ROW_LIMIT_HELP)
            with c[2]:
                st.checkbox("Scores are percentages (0 to 100)", key=K_PERCENT, help=texts.PERCENT_HELP)
                st.checkbox("Renormalise rows that do not sum to 1", key=K_RENORM, help=texts.RENORMALISE_HELP)
            st.form_submit_button("Read the file again with these choices", on_click=_on_apply, type="primary",
                                  icon=":material/refresh:", key="data_apply")
    if columns:
        _map_scores_form(target, cur)


def _positive_class_control(choice: tuple[str, tuple[str, str], str] | None) -> None:
    """The choice of the class the one score column is the probability of, beside the label and score
    columns, shown only where the file does not say it."""
    if choice is None:
        return
    label, names, score = choice
    options = [FILE_SAYS, *[str(n) for n in names]]
    if st.session_state.get(K_POSITIVE) not in options:
        st.session_state[K_POSITIVE] = FILE_SAYS
    st.selectbox(texts.POSITIVE_CLASS_LABEL, options, key=K_POSITIVE, help=texts.positive_class_help(score, label))


def _map_defaults(target: tuple[str, list[str], state.LoadOptions], cur: state.Loaded | None) -> dict[str, object]:
    """The map's score and outcome columns to start from, and the sentence for what cannot be chosen: the
    map in use; else, for a file that failed, the column its error was about and its outcome; for the
    loaded file, its label (when it has two classes) or its correct column, and a kept numeric column.

    Never a column the loader keeps as an identifier, a split, a date or a count, and never an outcome
    of other than two values (:func:`pbr_core.scores.suggest_map_columns`): a box left empty, with the
    reason (:func:`texts.map_columns_note`), rather than a choice the button would refuse."""
    key, columns, opts = target
    if opts.map_scores_column in columns and opts.label_column in columns:
        return {K_MAP_SCORE: opts.map_scores_column, K_MAP_LABEL: opts.label_column, K_MAP_NOTE: None}
    if key.startswith("failed:"):
        score, outcome, two = _map_columns_of_failed(columns)
        n_classes = None
    else:
        score, outcome, two = _map_columns_of_loaded(cur) if cur is not None else (None, None, None)
        n_classes = cur.preds.n_classes if cur is not None and cur.preds.kind == "multiclass" else None
    score, outcome = (score if score in columns else None), (outcome if outcome in columns else None)
    return {K_MAP_SCORE: score, K_MAP_LABEL: outcome,
            K_MAP_NOTE: texts.map_columns_note(score, outcome, two, n_classes)}


def _map_columns_of_failed(columns: list[str]) -> tuple[str | None, str | None, list[str] | None]:
    """(score, outcome, the columns of two values; None: not known) for the upload that failed to load."""
    from pbr_core import PredictionsError
    from pbr_core.loading import read_table
    from pbr_core.scores import identifier_reason, outcome_candidates, suggest_map_columns

    err, f = state.last_error() or {}, st.session_state.get(K_UPLOAD)
    about = [c for c in re.findall(r"'([^']+)'", err.get("message", "")) if c in columns]
    try:
        frame = read_table(f.getvalue(), name=f.name)
    except PredictionsError:  # not a table (NPZ): the error's first column that is not an id by name
        return next((c for c in about if not identifier_reason(None, c)), None), None, None
    return (*suggest_map_columns(frame, about), outcome_candidates(frame))


def _map_columns_of_loaded(cur: state.Loaded) -> tuple[str | None, str | None, list[str]]:
    """(score, outcome, the columns of two values) for the loaded file: its label when it has two classes,
    else its correct column (top-label files), else a kept column of two values; the score a kept column
    that can be one, else the file's own one score (binary, top-label), never one of K class columns."""
    from pbr_core.scores import outcome_candidates, suggest_map_columns

    p = cur.preds
    role = {r: c for c, r in reversed(p.column_roles)}  # the first column of each role
    meta = p.metadata
    two = outcome_candidates(meta) if meta is not None else []
    own = [role[r] for r, ok in (("label", p.kind == "binary"), ("correct", True)) if ok and r in role]
    outcome = own[0] if own else (suggest_map_columns(meta)[1] if meta is not None else None)
    score = suggest_map_columns(meta.drop(columns=[outcome], errors="ignore"))[0] if meta is not None else None
    if score is None and p.kind != "multiclass":
        score = next((c for c, r in p.column_roles if r in ("score", "confidence")), None)
    return score, outcome, own + two


def _map_scores_form(target: tuple[str, list[str], state.LoadOptions], cur: state.Loaded | None) -> None:
    columns = target[1]
    ss = st.session_state
    state.reset_for_data(K_MAP_FOR, target[0], lambda: _map_defaults(target, cur),
                         also=any(ss.get(k) is not None and ss.get(k) not in columns
                                  for k in (K_MAP_SCORE, K_MAP_LABEL)))
    note = ss.get(K_MAP_NOTE)
    with st.expander("My scores are not probabilities (a risk decile, a margin, a credit score)"):
        st.markdown(texts.MAP_SCORES_INTRO)
        if note:
            st.info(note.text, icon=":material/info:")
        if ss.pop(K_MAP_ASK, False):
            st.warning(texts.MAP_CHOOSE_FIRST, icon=":material/warning:")
        with st.form("data_map_form", border=False):
            c = st.columns(2, gap="medium")
            c[0].selectbox("Score column", columns, key=K_MAP_SCORE, help=texts.MAP_SCORE_HELP,
                           placeholder="Choose the column of scores")
            c[1].selectbox("Outcome column (two values: what the score predicts)", columns, key=K_MAP_LABEL,
                           placeholder="Choose the outcome column")
            c = st.columns(2, gap="medium")
            c[0].slider("Rows used to fit the map", 10, 50, 30, 5, key=K_MAP_SHARE, format="%d%%",
                        help=texts.MAP_SHARE_HELP)
            c[1].radio("Map", list(MAP_METHODS), format_func=MAP_METHODS.get, key=K_MAP_METHOD)
            st.form_submit_button("Map the scores and audit the other rows", on_click=_on_map, key="data_map",
                                  icon=":material/swap_horiz:", disabled=bool(note and note.nothing_to_map))


def _templates() -> None:
    st.caption(texts.TEMPLATES_CAPTION)
    cols = st.columns(len(TEMPLATES))
    for col, (kind, label, file_name) in zip(cols, TEMPLATES):
        with col:
            st.download_button(label, data=template_csv(kind), file_name=file_name, mime="text/csv",
                               key=f"template_{kind}", icon=":material/download:", on_click="ignore")


def _error_box(cur: state.Loaded | None) -> None:
    err = state.last_error()
    if not err:
        return
    raw = err["message"]  # the hints read the library's plain words; the page shows them as Markdown
    msg = texts.for_the_page(raw)
    hints = []
    # The rows-sum check (it offers to renormalise): its message already names the Score columns
    # control, and the column hint's "Choose the Label column" has nothing to do with rounding.
    sum_check = "renormalis" in raw
    if sum_check or "sum to" in raw:
        hints.append(texts.RENORMALISE_HINT)
    if "score columns are ambiguous" in raw:  # naming the label would not help: only the score columns' hint
        hints.append(texts.SCORE_COLUMNS_HINT)
    elif not sum_check and any(w in raw.lower() for w in ("label column", "score columns", "label_column=",
                                                          "score_columns=")):
        hints.append(texts.COLUMNS_HINT)
    if ("no score columns" in raw or "p(y=1) in [0, 1]" in raw or "ambiguous" in raw) and "--map-scores" not in raw:
        hints.append(texts.MAP_SCORES_HINT)
    st.error(texts.load_failed(err["file_name"], msg, hints, cur.name if cur else None, state.shown_at_start(cur)),
             icon=":material/error:")


def _summary(cur: state.Loaded) -> None:
    p = cur.preds
    st.subheader(texts.loaded_title(cur.name))
    n, accuracy = p.n, p.accuracy
    if cur.stream is not None:  # every row of the dataset, from the streamed statistics
        n, accuracy = cur.stream.n_total, cur.stream.stats["top"].accuracy
        st.info(texts.server_sample_note(n, p.n, "the first-rows preview below, PBR, Compare and Fit & apply"),
                icon=":material/dataset:")
    c = st.columns(4)
    c[0].metric("Rows (n)", f"{n:,}", help=texts.ROWS_HELP)
    c[1].metric("Classes (K)", state.classes_label(p), help=texts.CLASSES_HELP)
    c[2].metric("Accuracy", f"{accuracy:.2%}", help=texts.DATA_ACCURACY_HELP)
    c[3].metric("Kind", state.kind_label(p),
                help=texts.KIND_HELP)
    # Logits or probabilities: a sentence, not a card (the word does not fit a card's large font).
    mapped = p.score_map.get("score_column") if p.score_map else None
    st.markdown(texts.scores_read_as(p.input_type, log_odds=LOG_ODDS_NOTE in p.notes, mapped=mapped))
    only = p.only_label() if cur.stream is None else None
    notes = [n for n in p.notes if only is None or n != ONE_CLASS_NOTE.format(name=only)]
    if only is not None:  # a filtered export, most likely: shown as a warning, not among the notes
        st.warning(texts.ONE_CLASS_WARNING.format(name=texts.md(only)), icon=":material/warning:")
    if notes:
        st.info(texts.loader_notes(notes), icon=":material/info:")
    if p.column_roles:
        with st.expander(texts.columns_expander(len(p.column_roles)),
                         expanded=p.metadata is not None and len(p.column_roles) <= 30):
            st.dataframe(tables.roles_frame(p), hide_index=True)
            st.caption(texts.ROLES_CAPTION)
    st.markdown(texts.FIRST_ROWS_TITLE)
    preview = tables.preview_frame(p)
    st.dataframe(preview, hide_index=True, column_config=tables.preview_column_config(preview))
    if p.probs is not None and p.n_classes > tables.MAX_PREVIEW_CLASSES and p.kind != "binary":
        st.caption(texts.preview_classes_caption(tables.MAX_PREVIEW_CLASSES, p.n_classes))


def render() -> None:
    st.title("Data")
    st.markdown(texts.DATA_INTRO)
    cur = state.current()
    _source_controls(cur)
    _server_source(cur)
    _reading_options(cur)
    st.divider()
    if cur is None:
        st.info(texts.NOTHING_LOADED)
        return
    _summary(cur)


render()
