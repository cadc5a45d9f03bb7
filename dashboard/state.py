"""Session state of the dashboard: which predictions are loaded, and loading samples or uploads.

Everything a page needs about "the data" goes through this module, so the pages never touch
``st.session_state`` keys directly and later pages (recalibration, comparison) get the same data.

A third source, a *dataset on the server* (:func:`load_server`: a file, folder or glob under the folder
the operator configured with ``PBR_CALIB_DATA_ROOT``, for logs beyond the upload limit), is read in
one streamed pass (:mod:`pbr_core.stream`): the calibration pages use its streamed statistics of
every row (``Loaded.stream``), the pages that need rows in memory a uniform random sample of
:data:`SERVER_SAMPLE_ROWS` rows (``Loaded.preds``).

Loading is requested by widget callbacks (:func:`request_sample`, :func:`request_upload`) and
carried out by :func:`process_pending`, which ``app.py`` calls before it draws anything: the
sidebar then already shows the new data in the same run, and a spinner can be shown while a large
file is read (a callback cannot show one).

A failed load never replaces what was loaded before: the error is kept for the Data page to show
and the previous predictions stay in use.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import numpy as np
import streamlit as st

import pbr_core
from dashboard import memory, texts
from dashboard.load_cache import SHARED
from pbr_core import Predictions, PredictionsError
from pbr_core.loading import ACCEPTED_SUFFIXES, ReadLimitError, ReadLimits, default_limits
from pbr_core.metrics import BinaryTarget
from pbr_core.predictions import InputType

if TYPE_CHECKING:  # imported where used: reading datasets brings in pyarrow
    from pbr_core.loading.dialect import CsvDialect
    from pbr_core.stream import CalibrationStatistics

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]


def sample_dir() -> Path:
    """The bundled sample files: the copy a wheel installs beside the app (``dashboard/sample_data``,
    put there by setup.py's build step), else ``sample_data/`` at the top of a clone. The package's
    own copy comes first: an installed app's parent folder is site-packages, where another
    distribution could have put a ``sample_data`` folder of its own."""
    packaged = Path(__file__).resolve().parent / "sample_data"
    return packaged if packaged.is_dir() else ROOT / "sample_data"


SAMPLE_DIR = sample_dir()


def sample_folder() -> str:
    """The samples' folder as the Data page names it: relative to the folder holding the app's
    package (``sample_data`` in a clone, ``dashboard/sample_data`` in an installed wheel), so that the
    page names the folder it reads without showing the server's own paths."""
    return SAMPLE_DIR.relative_to(ROOT).as_posix()


DEFAULT_SAMPLE = "cifar100_densenet121.npz"
#: File endings the uploader accepts: whatever the loader reads. Streamlit matches the last suffix
#: only, so "gz" stands for .csv.gz / .tsv.gz (the loader names the problem if it is anything else).
UPLOAD_TYPES = sorted({suffix.rsplit(".", 1)[-1] for suffix in ACCEPTED_SUFFIXES})
_SAMPLE_SUFFIXES = tuple(ACCEPTED_SUFFIXES)


_K_LOADED = "pbr_loaded"
_K_ERROR = "pbr_load_error"
_K_PENDING = "pbr_pending_load"
_K_READ_STOPPED = "pbr_read_stopped"   # the dataset on the server whose reading the user stopped
_K_AT_START = "pbr_loaded_at_start"    # the default sample loaded on first start (the object itself)
_K_BINARY_TARGET = "pbr_binary_target"

# Bundled files get a readable name from their file name: "<dataset>_<model>[_toplabel]";
# anything that does not parse is listed by its file name.
_DATASETS = {"cifar100": "CIFAR-100", "cifar10": "CIFAR-10", "kitti": "KITTI", "imagenet": "ImageNet",
             "adult": "UCI Adult income"}
_MODELS = {
    "densenet121": "DenseNet-121", "resnet110": "ResNet-110", "resnet50": "ResNet-50",
    "xgboost": "XGBoost", "xgb": "XGBoost", "random_forest": "random forest", "rf": "random forest",
    "mlp": "1-hidden-layer network", "gradient_boosting": "gradient boosting",
}
#: What is known about specific bundled files beyond their name (shown in brackets).
_SAMPLE_DETAILS = {
    "cifar100_densenet121.npz": "logits, 100 classes",
    "cifar10_resnet110.npz": "logits, 10 classes",
    "adult_gradient_boosting.csv.gz": "with sex, race, age... columns",
}
#: Bundled files whose name does not follow "<dataset>_<model>": their whole title.
_SAMPLE_TITLES = {
    "llm_qa_confidence_correct.csv.gz": "LLM answers · 4 models × 5 QA benchmarks (confidence, correct)",
}
_DEFAULT_LAYOUT = {"kitti": "binary p(y=1)", "adult": "binary p(income > 50K)"}
_LAYOUT_TAGS = {"toplabel": "top-label only", "top_label": "top-label only", "multiclass": "multiclass",
                "binary": "binary"}

# --------------------------------------------------------------------------- values
@dataclass(frozen=True)
class LoadOptions:
    """How to read a file; the Data page's "Columns and reading options"."""

    label_column: str | None = None
    input_type: InputType = "auto"
    renormalize: bool = False
    max_rows: int | None = None
    score_columns: tuple[str, ...] = ()      # empty: detect
    percent: bool = False                    # the scores are percentages (0-100): divided by 100
    #: The class one score column is the probability of, among the label's two names, where the file
    #: does not say it (``approval_score`` beside approved/denied); None: the file says.
    positive_class: str | None = None
    group_columns: tuple[str, ...] = ()
    ignore_columns: tuple[str, ...] = ()
    #: A column of scores that are not probabilities: mapped to p(label) on ``map_share`` of the rows
    #: (``map_method``), the other rows audited (pbr_core.scores.map_scores); None: a prediction file.
    map_scores_column: str | None = None
    map_share: float = 0.3
    map_method: str = "isotonic"

    def as_kwargs(self) -> dict[str, Any]:
        return dict(label_column=self.label_column or None, input_type=self.input_type,
                    renormalize=self.renormalize, max_rows=self.max_rows or None,
                    score_columns=list(self.score_columns) or None, group_columns=list(self.group_columns),
                    ignore_columns=list(self.ignore_columns), percent=self.percent,
                    positive_class=self.positive_class or None)

    def dataset_kwargs(self) -> dict[str, Any]:
        """:meth:`as_kwargs` for ``pbr_core.stream.open_dataset``: a streamed pass reads every row (no cap)."""
        kwargs = self.as_kwargs()
        kwargs.pop("max_rows")
        return kwargs

    def tag(self) -> str:
        cols = "|".join(",".join(c) for c in (self.score_columns, self.group_columns, self.ignore_columns))
        mapping = f";map={self.map_scores_column}:{self.map_share:g}:{self.map_method}" if self.map_scores_column else ""
        return (f"lc={self.label_column or ''};it={self.input_type};rn={int(self.renormalize)};"
                f"mr={self.max_rows or 0};cols={cols}{mapping}" + (";pc=1" if self.percent else "")
                + (f";pos={self.positive_class}" if self.positive_class else ""))


@dataclass(frozen=True)
class Loaded:
    """The predictions in use and where they came from."""

    preds: Predictions
    name: str                       # what the sidebar shows
    file_name: str                  # sample file name, uploaded file name, or the server path typed
    origin: Literal["sample", "upload", "server"]
    key: str                        # content hash + options: the cache key of every computation
    options: LoadOptions = field(default_factory=LoadOptions)
    #: A dataset on the server: its streamed statistics (``preds`` is then a random sample of it).
    stream: "StreamInfo | None" = None
    #: A CSV upload's label and other columns (not the scores) as the text written in them
    #: (:func:`pbr_core.loading.read_csv_text`), for the calibrated-predictions download: the loader
    #: reads a ZIP code 01234 as the number 1234 (audit 11, finding 3). None: not a CSV upload, or too
    #: large to keep (:data:`AS_WRITTEN_MAX_BYTES`; ``numbers_as_read`` then says so).
    as_written: Any = field(default=None, repr=False, compare=False)
    #: A CSV whose text is not kept: the download writes its numbers as read (01234 as 1234).
    numbers_as_read: bool = False


@dataclass(frozen=True)
class StreamInfo:
    """A dataset on the server, read in one streamed pass: the statistics of all its rows, by what is
    measured ("top": top-label confidence; "pos": p(y=1) of binary data), and where it came from."""

    stats: dict[str, CalibrationStatistics]
    n_total: int
    n_files: int
    sample_n: int
    path: str
    #: The files read (resolved under the data folder): the Groups page reads them again.
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricView:
    """The (probs, labels) pair the metrics see, with its cache key and axis wording.

    For binary data the user picks between calibration of p(y=1) (paper Appendix A) and top-label
    calibration; top-label-only data uses (confidence, correct) via ``Predictions.metric_inputs``.
    """

    key: str
    probs: np.ndarray
    labels: np.ndarray
    n: int
    x_title: str
    y_title: str
    what: str                       # one phrase: what is being calibrated
    top_label_only: bool = False    # (confidence, correct) of a top-label-only file
    binary_positive: bool = False   # binary data measured on p(y=1)
    #: A dataset on the server: the streamed statistics of ALL its rows (pbr_core.stream), which the
    #: calibration numbers use; ``probs`` / ``labels`` / ``n`` are then a random sample of the rows.
    stats: CalibrationStatistics | None = None
    #: Each row's sum as the file wrote it, where the loader renormalised the rows
    #: (``Predictions.row_sums_as_written``): the test of calibration reads how finely the file rounded
    #: from the values as written. None: the values are as written.
    row_sums_as_written: np.ndarray | None = None

    @property
    def rows(self) -> int:
        """How many rows the calibration numbers describe: every row of a server dataset, else n."""
        return int(self.stats.n) if self.stats is not None else self.n

    def subsample(self, index: np.ndarray, tag: str) -> "MetricView":
        scale = self.row_sums_as_written
        return replace(self, key=f"{self.key}|{tag}", probs=self.probs[index], labels=self.labels[index],
                       n=int(index.size), stats=None, row_sums_as_written=None if scale is None else scale[index])


# --------------------------------------------------------------------------- samples
def list_samples() -> list[str]:
    """Prediction files in sample_data/, the default sample first, then alphabetically."""
    if not SAMPLE_DIR.is_dir():
        return []
    files = sorted(p.name for p in SAMPLE_DIR.iterdir()
                   if p.is_file() and p.name.lower().endswith(_SAMPLE_SUFFIXES))
    return sorted(files, key=lambda f: (f != DEFAULT_SAMPLE, f))


def describe_sample(file_name: str) -> str:
    """A readable name for a bundled sample, e.g. "KITTI · XGBoost (csv)"; unknown patterns: the file name."""
    if file_name in _SAMPLE_TITLES:
        return _SAMPLE_TITLES[file_name]
    m = re.match(r"^(?P<stem>.+?)\.(?P<ext>csv|tsv|csv\.gz|tsv\.gz|parquet|pq|npz|npy)$", file_name, flags=re.I)
    if not m:
        return file_name
    parts = m.group("stem").lower().split("_")
    if parts[0] not in _DATASETS:
        return file_name
    rest = "_".join(parts[1:])
    tags = [t for t in _LAYOUT_TAGS if re.search(rf"(^|_){t}($|_)", rest)]
    for t in tags:
        rest = re.sub(rf"(^|_){t}($|_)", "_", rest).strip("_")
    model = _MODELS.get(rest, rest.replace("_", " ")) if rest else ""
    details = [_LAYOUT_TAGS[t] for t in tags] or [_DEFAULT_LAYOUT.get(parts[0], "")]
    details = [d for d in details + [_SAMPLE_DETAILS.get(file_name, ""), m.group("ext").lower()] if d]
    title = f"{_DATASETS[parts[0]]} · {model}" if model else _DATASETS[parts[0]]
    return f"{title} ({', '.join(details)})"


# --------------------------------------------------------------------------- loading
def _read(digest: str, _source: bytes | str, file_name: str, tag: str, _options: LoadOptions,
          limits: ReadLimits | None = None) -> Predictions:
    if _options.map_scores_column:  # scores that are not probabilities: map, then audit the other rows
        from pbr_core.loading import read_table
        from pbr_core.scores import map_scores

        if not _options.label_column:
            raise PredictionsError(f"{file_name}: choose the outcome column the scores are mapped to.")
        frame = read_table(_source, name=file_name, limits=limits)
        try:
            return read_only(map_scores(frame, _options.map_scores_column, _options.label_column,
                                       share=_options.map_share, method=_options.map_method,
                                       source=file_name).preds)  # type: ignore[arg-type]
        except PredictionsError as exc:
            exc.columns = [str(c) for c in frame.columns]  # for the Data page's choices, without a second read
            raise
    return read_only(pbr_core.load_predictions(_source, name=file_name, limits=limits, **_options.as_kwargs()))


def read_only(preds: Predictions) -> Predictions:
    """``preds`` with its arrays made read-only (in place; returns it).

    The loaded predictions are shared: one object per (file, options) serves every session (see
    :mod:`dashboard.load_cache`), so no code may change them in place; a write raises "assignment destination
    is read-only" instead of silently changing another person's data. (Predictions is frozen; its
    metadata frame is handed to each session as its own copy-on-write view, :func:`_session_copy`.)
    """
    for array in (preds.labels, preds.confidence, preds.predicted, preds.probs, preds.logits):
        if isinstance(array, np.ndarray):
            array.setflags(write=False)
    return preds


def _session_copy(preds: Predictions) -> Predictions:
    """The shared predictions as one session holds them: the same read-only arrays, and a
    copy-on-write view of the metadata frame (a change to it stays in that session)."""
    if preds.metadata is None:
        return preds
    return replace(preds, metadata=preds.metadata.copy(deep=False))


#: Reads the loader estimates at this much memory or more (``pbr_core.loading``'s own estimate, the one
#: its ``max_memory`` limit is checked against, made before anything is parsed) wait for one another:
#: one runs at a time, server-wide, with the streamed reads of uploads. Two big parses at once add up
#: their memory for no gain on a small server. Counted in estimated memory, not in the file's bytes:
#: a 94 KB NPZ of 10,000 x 1,000 one-hot probabilities expands to 2 GB, and four tabs uploading it
#: at once, each under the old 1 MiB "big file" line, took the server to 5.75 GB (audit 12c).
#: ``PBR_CALIB_SERIAL_LOAD_MEMORY`` (bytes) overrides it.
SERIAL_LOAD_MEMORY = 128 * 2**20
_big_load = threading.Lock()


def serial_load_memory() -> int | None:
    """The estimated memory from which a read waits its turn: ``$PBR_CALIB_SERIAL_LOAD_MEMORY``, else
    :data:`SERIAL_LOAD_MEMORY`; None (``0`` or ``none``): reads in memory never wait for one another."""
    return _env_bytes("PBR_CALIB_SERIAL_LOAD_MEMORY", SERIAL_LOAD_MEMORY)


@contextlib.contextmanager
def big_read_turn(on_wait: Callable[[], None] | None = None):
    """Hold the server's one turn for a big read (in memory or streamed). While another read holds it,
    ``on_wait`` is called every half second: the page says why nothing happens yet, and each call lets
    Streamlit stop the run there when the user leaves or stops it (a thread blocked on the lock could
    not be stopped)."""
    while not _big_load.acquire(timeout=0.5 if on_wait is not None else -1):
        on_wait()  # type: ignore[misc]
    try:
        yield
    finally:
        _big_load.release()


def _read_queued(source: bytes | str, digest: str, file_name: str, options: LoadOptions,
                 on_wait: Callable[[], None] | None = None) -> Predictions:
    """Read, taking the big-read turn when the loader estimates the read at :func:`serial_load_memory`
    or more. The first attempt runs with that as its memory limit: the loader checks its estimate
    before it parses anything, so a big file stops there at the cost of its counting pass, and is
    read again, within the real limits, in its turn. A file over the real limit is refused without
    waiting for a turn."""
    full, serial = default_limits(), serial_load_memory()
    small_limit = full.max_memory if serial is None or full.max_memory is not None and serial > full.max_memory \
        else serial
    try:
        return _read(digest, source, file_name, options.tag(), options, replace(full, max_memory=small_limit))
    except ReadLimitError as exc:
        if exc.kind != "memory" or small_limit == full.max_memory:
            raise  # the real limits' answer already
        refused = full.max_memory is not None and not exc.at_least and exc.size > full.max_memory
    with contextlib.nullcontext() if refused else big_read_turn(on_wait):
        return _read(digest, source, file_name, options.tag(), options, full)


class _WaitNote:
    """The "waiting for the big-read turn" message's slot, made only when the message is shown: a slot made
    on every load moved the elements after it, and the browser re-created the moved file uploader, losing
    an upload in flight (tests/browser/test_dashboard_browser.py::
    test_a_corrected_file_right_after_a_failed_one_is_loaded)."""

    def __init__(self) -> None:
        self.slot = None

    def show(self) -> None:
        if self.slot is None:
            self.slot = st.empty()
        self.slot.info(texts.WAITING_FOR_READ_TURN)

    def clear(self) -> None:
        if self.slot is not None:
            self.slot.empty()


def _load(source: bytes | str, digest: str, file_name: str, origin: Literal["sample", "upload"],
          options: LoadOptions, name: str) -> str | None:
    """Load and, on success, make it current. Returns the error message or None.

    Parsed once per (content, options) and shared between sessions through
    :data:`dashboard.load_cache.SHARED` (a new session gets the parsed object itself, not an unpickled
    copy; for the default sample, which every new session loads, that was 15 MB and ~10 ms of CPU per
    session). An upload too large to read in memory is read in a stream instead when its format
    allows (:func:`_stream_upload`), else refused with how large it really is.
    """
    key = f"{digest}|{options.tag()}"
    waiting = _WaitNote()
    try:
        preds = SHARED.get_or_parse(key, lambda: _read_queued(source, digest, file_name, options, waiting.show),
                                    keep_unheld=origin == "sample")
        preds = _session_copy(preds)
    except ReadLimitError as exc:
        if origin == "upload" and isinstance(source, bytes) and exc.streamable and exc.kind != "cell":
            return _stream_upload(source, digest, file_name, options, exc)
        return _set_error(file_name, texts.too_large(exc), _columns_of(exc), options)
    except PredictionsError as exc:
        return _set_error(file_name, str(exc), _columns_of(exc), options, getattr(exc, "undecided_classes", None))
    except Exception as exc:  # noqa: BLE001 - a bad file must never crash the app
        logger.exception("reading %s failed", file_name)
        return _set_error(file_name, texts.read_unexpected(type(exc).__name__), [], options)
    finally:
        waiting.clear()
    if options.map_scores_column:
        name = f"{name} · {options.map_scores_column} mapped to probabilities"
    text, as_read = _upload_text(source, file_name, preds, options) if origin == "upload" else (None, False)
    loaded = Loaded(preds=preds, name=name, file_name=file_name, origin=origin, key=key, options=options,
                    as_written=text, numbers_as_read=as_read)
    SHARED.hold(key, loaded)  # the shared entry lives as long as a session holds it (uploads)
    st.session_state[_K_LOADED] = loaded
    st.session_state.pop(_K_ERROR, None)
    return None


#: A CSV upload keeps its other columns' text for the download when that text is estimated to take at
#: most this many bytes (the file's bytes plus 8 per cell kept: the text's offsets; measured, a 13 MB
#: file of 600,000 rows keeping 3 of its 4 columns held 20 MB, estimated 27 MB); a larger one is written
#: with its numbers as read, and the download's words say so. ``PBR_CALIB_AS_WRITTEN_BYTES`` overrides it.
AS_WRITTEN_MAX_BYTES = 64 * 2**20
_CSV_NAMES = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")


def _written_columns(preds: Predictions) -> list[str]:
    """The columns a download writes back unchanged: the label and the other columns, not the scores."""
    return [c for c, role in preds.column_roles if role in ("metadata", "label")] if preds.probs is not None else []


def _upload_text(source: bytes | str, file_name: str, preds: Predictions,
                 options: LoadOptions) -> tuple[Any, bool]:
    """(the upload's label and other columns as written, or None; whether a CSV's numbers are written
    as read instead): only for a CSV upload, only its non-score columns, only up to
    :data:`AS_WRITTEN_MAX_BYTES` of text (estimated before it is read)."""
    from pbr_core.loading import read_as_written

    columns = _written_columns(preds)
    csv = file_name.lower().endswith(_CSV_NAMES)
    if not csv or not columns or options.map_scores_column or not isinstance(source, bytes):
        return None, False
    read = len(columns) + len(preds.columns_with_role("score"))  # the scores are read too, for their style
    limit = _env_bytes("PBR_CALIB_AS_WRITTEN_BYTES", AS_WRITTEN_MAX_BYTES)
    if limit is not None and len(source) + 8 * preds.n * read > limit:
        return None, True
    try:
        text = read_as_written(source, preds, columns, name=file_name)
    except (PredictionsError, ValueError, OSError, MemoryError):
        logger.info("the columns of %s as written could not be read again; numbers written as read", file_name)
        return None, True
    return text, text is None


def _env_bytes(name: str, default: int) -> int | None:
    """``$name`` as a size written as the read limits are (``134217728``, ``512MB``, ``2GiB``; ``0`` or
    ``none``: None, no limit), else ``default``; text that is no size is an error naming the variable, as
    for the read limits (``pbr_core.loading._limits.env_size``; it was ignored, and ``512MB`` silently
    meant the default)."""
    from pbr_core.loading._limits import env_size

    return env_size(name, default)


def as_written_for(data_key: str) -> tuple[Callable[[], Any], bool]:
    """For a result computed on the data of ``data_key``: (a function giving its label and other
    columns as written, or None, for ``save_predictions``' ``as_written``; whether the download
    writes them as they were, False where a CSV's numbers are written as read). A bundled CSV sample
    is read again as text when the download is made (a file on disk: nothing kept per session)."""
    loaded = current()
    if loaded is None or loaded.key != data_key:
        return (lambda: None), True
    if loaded.stream is not None:
        return (lambda: None), not loaded.file_name.lower().endswith(_CSV_NAMES)
    if loaded.origin == "sample" and loaded.file_name.lower().endswith(_CSV_NAMES) \
            and not loaded.options.map_scores_column:
        path, preds = SAMPLE_DIR / loaded.file_name, loaded.preds

        def sample_text():
            from pbr_core.loading import read_as_written

            columns = _written_columns(preds)
            try:
                return read_as_written(str(path), preds, columns) if columns else None
            except (PredictionsError, ValueError, OSError):
                return None
        return sample_text, True
    text = loaded.as_written
    return (lambda: text), not loaded.numbers_as_read


def download_format(data_key: str) -> "CsvDialect | bool":
    """How the calibrated-predictions download of a result on ``data_key`` is written: the upload's
    own CSV dialect (kept with its text: separator, decimal mark, byte-order mark, line ends, the
    score columns that held percentages); True for a bundled CSV sample (its own format too, read
    when the download is made); False for a standard CSV (not a CSV, or a CSV too large to keep)."""
    from pbr_core.loading.dialect import CsvDialect

    loaded = current()
    if loaded is None or loaded.key != data_key or loaded.stream is not None:
        return False
    if loaded.as_written is not None:
        return CsvDialect.of(loaded.as_written)
    return (loaded.origin == "sample" and loaded.file_name.lower().endswith(_CSV_NAMES)
            and not loaded.options.map_scores_column)


def _columns_of(exc: Exception) -> list[str]:
    """The columns a failed read saw (``PredictionsError.columns``, set by the loader), or none."""
    return list(getattr(exc, "columns", None) or [])


def _set_error(file_name: str, message: str, columns: list[str] | tuple[str, ...] = (),
               options: LoadOptions | None = None, classes: tuple | None = None) -> str:
    """Keep a failed load's message for the Data page, with the failed file's ``columns`` (which the
    loader read before it failed: ``PredictionsError.columns``; never read a second time) for its
    column choices, and ``classes`` (``PredictionsError.undecided_classes``: label column, its two
    names, score column) when the file does not say which name the score is the probability of."""
    # The loader starts its messages with the file name; the error box names the file already.
    if message.startswith(f"{file_name}: "):
        message = message[len(file_name) + 2:]
    st.session_state[_K_ERROR] = {"file_name": file_name, "message": message, "columns": list(columns),
                                  "options": options or LoadOptions(), "classes": classes}
    return message


def load_sample(file_name: str, options: LoadOptions = LoadOptions()) -> str | None:
    """Load a bundled sample; returns an error message or None."""
    path = SAMPLE_DIR / file_name
    if not path.is_file():
        return _set_error(file_name, f"The sample file {file_name} is not in {SAMPLE_DIR}.")
    stat = path.stat()
    digest = f"sample:{file_name}:{stat.st_size}:{stat.st_mtime_ns}"
    return _load(str(path), digest, file_name, "sample", options, describe_sample(file_name))


def load_upload(data: bytes, file_name: str, options: LoadOptions = LoadOptions()) -> str | None:
    """Load uploaded bytes (the file name gives the format); returns an error message or None.

    On failure the previously loaded predictions stay current.
    """
    digest = "upload:" + hashlib.blake2b(data, digest_size=16).hexdigest()
    return _load(data if isinstance(data, bytes) else bytes(data), digest, file_name, "upload", options, file_name)


def ensure_loaded() -> Loaded | None:
    """On first start load the default sample so every page works immediately."""
    if _K_LOADED not in st.session_state and _K_ERROR not in st.session_state:
        samples = list_samples()
        if samples and load_sample(samples[0]) is None:
            st.session_state[_K_AT_START] = current()
    return current()


def shown_at_start(loaded: Loaded | None) -> bool:
    """Whether ``loaded`` is the default sample loaded on first start, not data the user chose (the
    Data page then says "the bundled sample shown at start", never "the data loaded before")."""
    return loaded is not None and st.session_state.get(_K_AT_START) is loaded


def current() -> Loaded | None:
    return st.session_state.get(_K_LOADED)


def current_or_prompt() -> Loaded | None:
    """The loaded data, or None after telling the user to load some (every analysis page starts so)."""
    loaded = current()
    if loaded is None:
        st.info("Load predictions on the Data page first.")
    return loaded


def read_stopped() -> str | None:
    """The path of the dataset on the server whose reading the user stopped (until the next read)."""
    return st.session_state.get(_K_READ_STOPPED)


def last_error() -> dict | None:
    """{"file_name", "message", "columns", "options", "classes"} of the last failed load, until the next
    successful one (``columns``: the failed file's columns, for the Data page's column choices;
    ``classes``: see :func:`_set_error`)."""
    return st.session_state.get(_K_ERROR)


# --------------------------------------------------------------------------- deferred loads
def request_sample(file_name: str, options: LoadOptions) -> None:
    """Ask for a sample to be loaded at the start of the next run (use in widget callbacks)."""
    st.session_state[_K_PENDING] = ("sample", file_name, None, options)


def request_upload(file_name: str, data: bytes, options: LoadOptions) -> None:
    """Ask for uploaded bytes to be loaded at the start of the next run (use in widget callbacks)."""
    st.session_state[_K_PENDING] = ("upload", file_name, data, options)


def request_server(path: str, options: LoadOptions) -> None:
    """Ask for a dataset on the server to be read at the start of the next run (widget callbacks)."""
    st.session_state[_K_PENDING] = ("server", path, None, options)


def process_pending() -> None:
    """Carry out a requested load, with a spinner (called by app.py before anything is drawn)."""
    pending = st.session_state.pop(_K_PENDING, None)
    if pending is None:
        return
    kind, file_name, data, options = pending
    if kind == "server":
        load_server(file_name, options)
        return
    with st.spinner(f"Reading {texts.md(file_name)} …"):
        if kind == "sample":
            load_sample(file_name, options)
        else:
            load_upload(data, file_name, options)
    if kind == "upload":
        # The parser's temporaries are free now; hand back what the allocators keep of them (after
        # any upload: a small file can expand a thousand times when read).
        memory.release_free_memory()


# --------------------------------------------------------------------------- page choices that follow the data
def reset_for_data(marker: str, data_key: str, defaults: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
                   *, also: bool = False) -> bool:
    """Set a page's widgets to their defaults for new data; keep the user's choices for the same data.

    Several choices depend on the data (n_re < n, B <= n, the group column): each page keeps them while
    the same data stays loaded (also across page switches) and starts again from the defaults for new
    data. ``marker`` is the session key that remembers which data (``data_key``: ``Loaded.key`` or
    ``MetricView.key``) the values belong to; ``defaults`` maps widget keys to values, or is a function
    that computes them, called only on a reset. ``also``: reset even for the same data (a value out of
    range, a widget value Streamlit dropped while another page showed). Returns whether it reset.
    """
    ss = st.session_state
    if ss.get(marker) == data_key and not also:
        return False
    ss[marker] = data_key
    for key, value in (defaults() if callable(defaults) else defaults).items():
        ss[key] = value
    return True


#: Session keys of the calibration pages' choices that the report reads too (recal_ui.audit_choices).
#: Here, not in the pages, because a page file runs when it is imported.
K_REL_BINS, K_REL_BINS_FOR = "rel_n_bins", "rel_n_bins_for"
K_BINS_L, K_BINS_EPS, K_BINS_BMAX, K_BINS_FOR = "bins_lipschitz", "bins_eps", "bins_bmax", "bins_for"
K_GROUPS_BY, K_GROUPS_BY2, K_GROUPS_EVERY, K_GROUPS_FOR = "groups_by", "groups_by2", "groups_every", "groups_for"
#: The Groups page's "no second column" choice.
GROUPS_NONE = "(none)"


@dataclass(frozen=True)
class AuditChoices:
    """What the user chose on the calibration pages (their defaults where a page was not visited):
    what the audit report shows them at (:mod:`dashboard.audit`), and the pages' own defaults."""

    n_bins: int                 # the Reliability page's B
    lipschitz: float = 1.0      # Bins & bias: L
    eps: float = 0.05           # Bins & bias: ε
    bmax: int = 100             # Bins & bias: largest B on the chart
    group_by: tuple[str, ...] = ()   # Groups page: the column(s) grouped by; () when not visited
    group_every: str = ""            # Groups page: dates bucketed by "day", "week", "month" or not

    @classmethod
    def defaults(cls, n: int) -> "AuditChoices":
        """The pages' defaults for n rows: B = floor(n^(1/3)), L = 1, ε = 0.05, B shown up to 100 (up to n
        for a smaller file, but at least 10)."""
        return cls(n_bins=min(pbr_core.optimal_n_bins(n), max(n, 1)), bmax=min(100, max(n, 10)))


# --------------------------------------------------------------------------- what the metrics see
def binary_target() -> BinaryTarget:
    """The app's one choice of ECE on binary data (the sidebar; its default is decided in pbr_core, for
    the library, the CLI and the app at once: ``pbr_core.metrics.BINARY_TARGET``), for every page and
    the report."""
    return st.session_state.get(_K_BINARY_TARGET, pbr_core.metrics.BINARY_TARGET.default)


BINARY_TARGET_KEY = _K_BINARY_TARGET


def metric_view(loaded: Loaded, target: BinaryTarget | None = None) -> MetricView:
    """The arrays the metrics take for the loaded data (see :class:`MetricView`)."""
    preds = loaded.preds
    target = binary_target() if target is None else target
    stats = loaded.stream.stats if loaded.stream is not None else {}
    if pbr_core.metrics.BINARY_TARGET.measured(preds.kind, target) == "positive":
        x_title, y_title = texts.axis_titles(True)
        return MetricView(key=f"{loaded.key}|pos", probs=preds.p_positive, labels=preds.labels, n=preds.n,
                          x_title=x_title, y_title=y_title,
                          what="the predicted probability of the positive class, p(y=1)",
                          binary_positive=True, stats=stats.get("pos"), row_sums_as_written=preds.row_sums_as_written)
    probs, labels = preds.metric_inputs()
    x_title, y_title = texts.axis_titles(False)
    return MetricView(key=f"{loaded.key}|top", probs=probs, labels=labels, n=preds.n,
                      x_title=x_title, y_title=y_title,
                      what="the confidence of the predicted class (top-label calibration)",
                      top_label_only=preds.kind == "top_label", stats=stats.get("top"),
                      row_sums_as_written=preds.row_sums_as_written)


def kind_label(preds: Predictions) -> str:
    return {"multiclass": "multiclass", "binary": "binary", "top_label": "top-label"}.get(preds.kind, preds.kind)


def classes_label(preds: Predictions) -> str:
    """K for display; a top-label-only file need not say how many classes there are."""
    return f"{preds.n_classes:,}" if preds.n_classes else "not in file"


def recal_binary_ece(preds: Predictions) -> BinaryTarget:
    """What the recalibration pages (PBR, Compare and its sweep and group gaps, Generalization, Fit &
    apply) score on binary data: the sidebar's one choice, as the calibration pages measure it."""
    return binary_target() if preds.kind == "binary" else "top_label"


# --------------------------------------------------------------------------- datasets on the server
#: Rows kept in memory from a server dataset for the pages that need rows (PBR, Compare, Fit & apply,
#: equal-mass bins, the smoothed curve, other estimators): a uniform random sample, 200,000 rows at
#: most (about 16 MB at K = 10); the operator may set another size with ``PBR_CALIB_SAMPLE_ROWS``.
SERVER_SAMPLE_ROWS = 200_000


def server_sample_rows() -> int:
    """The sample size for server datasets: ``$PBR_CALIB_SAMPLE_ROWS`` when it is a positive integer."""
    import os

    try:
        value = int(os.environ.get("PBR_CALIB_SAMPLE_ROWS", ""))
    except ValueError:
        return SERVER_SAMPLE_ROWS
    return value if value > 0 else SERVER_SAMPLE_ROWS
#: Per-bin statistics are kept for every B up to this (the Bins & bias page's largest B) and up to
#: floor(n^(1/3)) (the Reliability slider's largest B).
SERVER_CURVE_BINS = 300


def server_root() -> Path | None:
    """The folder the operator allows server datasets from: ``$PBR_CALIB_DATA_ROOT``, else
    ``data_root`` in the ``[pbr_calib]`` section of ``.streamlit/secrets.toml``; None: no server
    datasets (the Data page then does not offer them)."""
    from pbr_core.stream import data_root

    root = data_root()
    if root is not None:
        return root
    try:
        configured = st.secrets.get("pbr_calib", {}).get("data_root")
    except Exception:  # noqa: BLE001 - no secrets file is the normal case
        configured = None
    return data_root(configured) if configured else None


def within_data_root(message: str) -> str:
    """``message`` with the data folder's absolute path taken out: the files of a dataset on the
    server are named relative to it, as the user typed them and as the page names them elsewhere
    (an error said ``/srv/prediction-logs/2025/bad.csv``; the server's folders are not the user's
    business). The folder itself, where a message names it alone, is "the data folder"."""
    root = server_root()
    if root is None:
        return message
    raw = os.environ.get("PBR_CALIB_DATA_ROOT", "").strip()
    for prefix in dict.fromkeys([str(root), *([raw.rstrip("/\\")] if raw and os.path.isabs(raw) else [])]):
        if len(prefix) > 1:  # never "/" itself: that would touch every path
            message = message.replace(prefix + os.sep, "").replace(prefix, "the data folder")
    return message


def _server_key(files: list[str], options: LoadOptions) -> str:
    h = hashlib.blake2b(digest_size=16)
    for f in files:
        st_ = Path(f).stat()
        h.update(f"{f}:{st_.st_size}:{st_.st_mtime_ns};".encode())
    return f"server:{h.hexdigest()}|{options.tag()}"


def load_server(path: str, options: LoadOptions = LoadOptions()) -> str | None:
    """Read a dataset on the server in one streamed pass; returns an error message or None.

    ``path`` is relative to :func:`server_root` (a file, a folder or a glob); anything outside it is
    refused (:func:`pbr_core.stream.resolve_server_path`). Every row is validated; the statistics of
    every row and a random sample of :func:`server_sample_rows` rows are kept. On failure the data
    loaded before stays in use.
    """
    from dataclasses import replace as _replace

    from pbr_core.stream import ServerPathError, open_dataset, resolve_server_path, scan_dataset

    root = server_root()
    shown = path.strip() or "(empty path)"
    if root is None:
        return _set_error(shown, "no data folder is configured on this server (PBR_CALIB_DATA_ROOT).")
    st.session_state.pop(_K_READ_STOPPED, None)
    stop = st.empty()
    # Its click makes Streamlit interrupt this run at the next progress update (the next record batch);
    # the load request was taken already, so the next run does not read again.
    stop.button("Stop reading", key="data_read_stop", icon=":material/stop_circle:",
                on_click=lambda: st.session_state.__setitem__(_K_READ_STOPPED, shown),
                help="Stops reading the dataset; the data loaded before stays in use.")
    bar = st.progress(0.0, text=f"Reading {texts.md(shown)} …")

    def progress(done: int, total: int | None, message: str = "") -> None:
        frac = done / total if total else 0.0
        bar.progress(min(1.0, frac), text=f"Reading {texts.md(shown)}: {done:,}" + (f" of {total:,} rows" if total else " rows"))

    try:
        files = resolve_server_path(path, root)
        ds = open_dataset(files, **options.dataset_kwargs())
        lay = ds.layout()
        stats, sample = scan_dataset(ds, _stream_configs(ds), sample_size=server_sample_rows(), progress=progress)
        key = _server_key(files, options)
    except (ServerPathError, PredictionsError) as exc:
        return _set_error(shown, within_data_root(str(exc)), [], options)
    except Exception as exc:  # noqa: BLE001 - a bad dataset must never crash the app
        logger.exception("reading the server dataset %s failed", shown)
        return _set_error(shown, texts.read_unexpected(type(exc).__name__), [], options)
    finally:
        bar.empty()
        stop.empty()
    # The sample's notes first say what it is; the loader's notes about the columns follow.
    sample = _replace(sample, notes=_stream_notes(sample, lay, ds, stats), column_roles=lay.column_roles)
    info = StreamInfo(stats=stats, n_total=int(stats["top"].n), n_files=len(files), sample_n=sample.n, path=shown,
                      files=tuple(files))
    st.session_state[_K_LOADED] = Loaded(preds=read_only(sample), name=f"{shown} (dataset on the server)",
                                         file_name=shown, origin="server", key=key, options=options, stream=info)
    st.session_state.pop(_K_ERROR, None)
    return None


def _stream_notes(sample, lay, ds, stats) -> tuple[str, ...]:
    """A streamed dataset's notes: what its sample is, how the columns were read, and files or rows
    that are copies of others (from the whole pass, not the sample: ``pbr_core.stream.copies_notes``)."""
    from pbr_core.stream import copies_notes

    notes = (*sample.notes, *lay.notes, *copies_notes(ds, stats["top"]))
    stats["top"].copies = None  # read once: its hashes (up to 8 MB) need not stay in the session
    return notes


# --------------------------------------------------------------------------- uploads read in a stream
#: An upload too large to read in memory (pbr_core.loading's read limits) is read in a stream when
#: it is a CSV / TSV (also gzip-compressed) or Parquet file of at most this many rows: the
#: statistics of every row and a sample, as for a dataset on the server. More rows are refused
#: (a stream costs ~5 s of a core per million rows: 50 million rows took 240 s on the test machine,
#: benchmarks/RESULTS_bombs.md). ``PBR_CALIB_UPLOAD_STREAM_ROWS`` overrides it; 0 streams no upload.
UPLOAD_STREAM_ROWS = 20_000_000


def upload_stream_rows() -> int:
    """The row limit of a streamed upload: ``$PBR_CALIB_UPLOAD_STREAM_ROWS`` when it is a whole number >= 0."""
    import os

    try:
        value = int(os.environ.get("PBR_CALIB_UPLOAD_STREAM_ROWS", ""))
    except ValueError:
        return UPLOAD_STREAM_ROWS
    return value if value >= 0 else UPLOAD_STREAM_ROWS


class _TooManyRows(Exception):
    """A streamed upload passed :func:`upload_stream_rows`."""


def _stream_upload(data: bytes, digest: str, file_name: str, options: LoadOptions, why: ReadLimitError) -> str | None:
    """Read an upload that is too large for memory in one streamed pass (as :func:`load_server` reads
    a dataset): its bytes go to a temporary file (removed when the session lets go of the data), the
    statistics of every row and a random sample are kept. Returns an error message or None."""
    import os
    import tempfile
    import weakref
    from dataclasses import replace as _replace

    from pbr_core.stream import open_dataset, scan_dataset

    limit = upload_stream_rows()
    suffix = next((s for s in sorted(_STREAM_SUFFIXES, key=len, reverse=True) if file_name.lower().endswith(s)), None)
    if suffix is None or limit == 0:  # the stream reads by the file name's ending (CSV bytes under another name)
        return _set_error(file_name, texts.too_large(why), _columns_of(why), options)
    if why.rows is not None and why.rows > limit:  # counted already: not worth a pass
        return _set_error(file_name, texts.too_many_rows_to_stream(why, why.rows, limit), _columns_of(why), options)
    fd, path = tempfile.mkstemp(prefix="pbr-calib-upload-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    stop = st.empty()
    stop.button("Stop reading", key="data_upload_stop", icon=":material/stop_circle:",
                on_click=lambda: _set_error(file_name, texts.UPLOAD_READ_STOPPED, _columns_of(why), options),
                help="Stops reading the file; the data loaded before stays in use.")
    bar = st.progress(0.0, text=texts.streaming_upload(file_name, why))

    def progress(done: int, total: int | None, message: str = "") -> None:
        if done > limit:
            raise _TooManyRows(done, False)
        bar.progress(min(1.0, done / total) if total else 0.0, text=texts.streaming_upload(file_name, why, done, total))

    waiting = _WaitNote()
    try:
        # One big read at a time, server-wide, with the in-memory ones (4 tabs streaming a 1.8 MB file
        # at once took the server to 2 GB, audit 12c).
        with big_read_turn(waiting.show):
            waiting.clear()
            ds = open_dataset(path, **options.dataset_kwargs())
            counted = ds.num_rows()  # Parquet: from the footer
            if counted is not None and counted > limit:
                raise _TooManyRows(counted, True)
            if ds.fmt == "parquet":
                _check_batch_text(path, ds.batch_rows, why)
            # The rows the loader counted before it refused the file: no second counting pass for B and the resamples.
            stats, sample = scan_dataset(ds, _stream_configs(ds, why.rows), sample_size=server_sample_rows(),
                                         progress=progress)
            lay = ds.layout()
    except _TextBomb as exc:
        os.unlink(path)
        return _set_error(file_name, texts.too_much_text_to_stream(exc.args[0]), _columns_of(why), options)
    except _TooManyRows as exc:
        os.unlink(path)
        rows, exact = exc.args
        return _set_error(file_name, texts.too_many_rows_to_stream(why, rows, limit, exact), _columns_of(why), options)
    except PredictionsError as exc:
        os.unlink(path)
        return _set_error(file_name, str(exc).replace(path, file_name), _columns_of(why), options)
    except Exception as exc:  # noqa: BLE001 - a bad file must never crash the app
        os.unlink(path)
        logger.exception("streaming the upload %s failed", file_name)
        return _set_error(file_name, texts.read_unexpected(type(exc).__name__), _columns_of(why), options)
    except BaseException:  # Stop reading (Streamlit interrupts the run): nothing is kept
        os.unlink(path)
        raise
    finally:
        bar.empty()
        stop.empty()
        waiting.clear()
    sample = _replace(sample, notes=_stream_notes(sample, lay, ds, stats), column_roles=lay.column_roles)
    info = StreamInfo(stats=stats, n_total=int(stats["top"].n), n_files=1, sample_n=sample.n, path=file_name,
                      files=(path,))
    loaded = Loaded(preds=read_only(sample), name=file_name, file_name=file_name, origin="upload",
                    key=f"{digest}|stream|{options.tag()}", options=options, stream=info)
    weakref.finalize(loaded, _remove, path)  # the Groups page reads the file again while the data is in use
    st.session_state[_K_LOADED] = loaded
    st.session_state.pop(_K_ERROR, None)
    return None


class _TextBomb(Exception):
    """A Parquet upload whose text would decode into too much memory even one batch at a time."""


def _check_batch_text(path: str, batch_rows: int, why: ReadLimitError) -> None:
    """The stream decodes a batch of rows at a time, text included: one long value repeated on every
    row (stored once, in the file's dictionary) would decode into batch rows x its length. Refused
    when that is over the memory limit (the same limit the in-memory read had)."""
    from pbr_core.loading import default_limits
    from pbr_core.loading._limits import limit_error
    from pbr_core.loading._tables import parquet_widest_text_row

    limit = default_limits().max_memory
    widest = parquet_widest_text_row(path, stop_at=None if limit is None else limit // max(batch_rows, 1) + 1)
    if limit is not None and batch_rows * widest > limit:
        raise _TextBomb(limit_error(path, kind="memory", size=batch_rows * widest, limit=limit, streamable=False,
                                    what=f"its text columns hold {widest:,} bytes or more in a row; reading "
                                         f"{batch_rows:,} rows at a time"))


#: File endings the stream reads (pbr_core.stream), with the ending the temporary file keeps.
_STREAM_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".parquet", ".pq")


def _stream_configs(ds, n_rows: int | None = None) -> dict:
    """What a streamed pass measures: the top-label statistics, and p(y=1) for binary data, with the
    per-bin sums for every B up to :data:`SERVER_CURVE_BINS` (and floor(n^(1/3))); ``n_rows``: the
    dataset's rows when known (else a CSV dataset is counted in a pass of its own)."""
    from dataclasses import replace as _replace

    from pbr_core.stream import stats_config

    base = stats_config(ds, curve_bins=range(1, SERVER_CURVE_BINS + 1), n_rows=n_rows)
    base = _replace(base, curve_bins=tuple(range(1, max(SERVER_CURVE_BINS, base.n_bins) + 1)))
    configs = {"top": _replace(base, target="top_label")}
    if ds.layout().kind == "binary":
        configs["pos"] = _replace(base, copies=False)  # the same rows: their copies are looked for once
    return configs


def _remove(path: str) -> None:
    import os

    try:
        os.unlink(path)
    except OSError:
        pass
