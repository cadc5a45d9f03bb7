#!/usr/bin/env python3
"""Regenerate the KITTI (and CIFAR-10 top-label) sample prediction files in ``sample_data/``.

What it does
------------
1. Loads the KITTI features exactly as used by Wenger et al. (2020) and by the seed paper
   (Fujisawa & Futami, ICML 2025, appendix "Details of experimental settings": n_tr = 16000; the
   9090 test rows are what the paper splits into n_re = 1000 / n_te = 8000):
   ``kitti_binary_pycalib.npz`` with ``X_train[16000, 60]``, ``y_train`` (0..7),
   ``y_train_binary``, ``X_test[9090, 60]``, ``y_test``, ``y_test_binary`` (= y > 0).
2. Trains the paper's three classifiers on all 16000 training rows. That appendix says they "were
   trained by adapting the code from Wenger et al. (2020)" (github.com/JonathanWenger/pycalib,
   ``benchmark/KITTI.py``); the hyper-parameters below are that code's, with its seed
   ``random_state = 1``, and raw (unscaled) float64 features as pycalib's loader gives them:

   - XGBoost: ``XGBClassifier(booster="gbtree", n_estimators=100)``, every other parameter at the
     installed xgboost's default (3.x: max_depth 6, learning_rate 0.3, tree_method "hist").
   - Random forest: ``RandomForestClassifier(n_estimators=100, criterion="gini",
     min_samples_split=2, bootstrap=True)``.
   - 1-hidden-layer network: ``MLPClassifier(hidden_layer_sizes=(100,), activation="relu",
     solver="adam")`` with scikit-learn's default max_iter = 200 (it stops there with a
     ConvergenceWarning, as in pycalib).

   ``n_jobs`` (default 2) is the number of threads of the two tree ensembles; their output does
   not depend on it. BLAS runs on one thread, so the network's float64 sums (and the files) are
   bitwise reproducible: with several BLAS threads they may differ by ~1e-16.
3. Writes each model's test-set predictions as a binary file (one p(y=1) column ``p_positive`` +
   ``label``), the random forest's 8-class predictions (``class_0`` .. ``class_7`` + ``label``;
   the data documents no class names, and class 4 has no training rows so its column is all 0),
   and a top-label-only file (``confidence``, ``predicted``, ``label``) derived from
   ``sample_data/cifar10_resnet110.npz`` (softmax of its logits).
4. Re-reads every written file, checks it (n, probability rows summing to 1 within 1e-6) and prints
   a Markdown table of n, K, accuracy and top-label ECE (15 bins and B = floor(n^(1/3))) from the
   files as written. Those are the numbers recorded in ``sample_data/SOURCES.md``.

Floats are written with 9 significant digits (lossless for xgboost's float32 output); the
multiclass rows are renormalised in float64 first, so every row sums to 1 within ~1e-8.

Usage (from the repository root; about 40 s on two idle cores, up to ~3 min when they are busy)::

    python scripts/make_kitti_predictions.py                     # default data path below
    python scripts/make_kitti_predictions.py /path/to/kitti_binary_pycalib.npz --out sample_data

The output is deterministic for a given set of library versions (fixed seeds); the results above
were made with numpy 2.4, scikit-learn 1.9.1, xgboost 3.2.0, pandas 3.1, pyarrow 26.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("/work/shared/data/raw/kitti_binary_pycalib.npz")
DEFAULT_OUT = REPO_ROOT / "sample_data"

#: pycalib's benchmark/KITTI.py seed.
RANDOM_STATE = 1
#: Significant digits for floats in CSV files.
FLOAT_FORMAT = "%.9g"
N_KITTI_CLASSES = 8


def make_classifiers(n_jobs: int) -> dict:
    """The paper's three KITTI classifiers, with pycalib's hyper-parameters (see module docstring)."""
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neural_network import MLPClassifier

    return {
        "xgboost": xgb.XGBClassifier(booster="gbtree", n_estimators=100, random_state=RANDOM_STATE, n_jobs=n_jobs),
        "random_forest": RandomForestClassifier(
            n_estimators=100, criterion="gini", min_samples_split=2, bootstrap=True,
            n_jobs=n_jobs, random_state=RANDOM_STATE,
        ),
        "mlp": MLPClassifier(hidden_layer_sizes=(100,), activation="relu", solver="adam", random_state=RANDOM_STATE),
    }


#: Where each binary model's predictions go. One Parquet file so the sample set covers that format
#: (and keeps the network's extreme probabilities at full float64 precision).
BINARY_FILES = {
    "xgboost": "kitti_xgboost.csv",
    "random_forest": "kitti_random_forest.csv",
    "mlp": "kitti_mlp.parquet",
}
MULTICLASS_MODEL = "random_forest"
MULTICLASS_FILE = "kitti_multiclass_random_forest.csv"
TOPLABEL_SOURCE = "cifar10_resnet110.npz"
TOPLABEL_FILE = "cifar10_resnet110_toplabel.csv"


def fit_predict(clf, X_train, y_train, X_test) -> np.ndarray:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X_train, y_train)
    for w in caught:
        if w.category.__name__ == "ConvergenceWarning":
            print(f"    note: {type(clf).__name__} stopped at max_iter={clf.max_iter} without converging "
                  "(expected: pycalib and the paper use the default max_iter)")
        else:
            print(f"    warning: {w.category.__name__}: {w.message}")
    return np.asarray(clf.predict_proba(X_test), dtype=np.float64)


def write_table(df: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False, engine="pyarrow", compression="zstd")
    else:
        df.to_csv(path, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def read_table(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def summarise(name: str, probs_or_conf: np.ndarray, labels: np.ndarray, kind: str, n_classes: int) -> dict:
    """n, K, accuracy and top-label ECE of a file's contents, computed with pbr_core."""
    import pbr_core

    n = labels.shape[0]
    if kind == "top_label":
        conf, predicted = probs_or_conf
        correct = (predicted == labels).astype(np.float64)
        ece15 = pbr_core.ece(conf, correct, n_bins=15)      # top-label ECE = binary ECE of (conf, correct)
        eceB = pbr_core.ece(conf, correct, n_bins=None)
        acc = correct.mean()
    else:
        probs = probs_or_conf
        # Prediction = argmax (ties -> lowest class), as the loader does; for binary p = 0.5 -> class 0.
        acc = float(np.mean(probs.argmax(axis=1) == labels))
        ece15 = pbr_core.ece(probs, labels, n_bins=15)
        eceB = pbr_core.ece(probs, labels, n_bins=None)
    return {"file": name, "kind": kind, "n": n, "K": n_classes, "accuracy": acc,
            "ece_15": ece15, "ece_B": eceB, "B": pbr_core.optimal_n_bins(n)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA,
                    help=f"kitti_binary_pycalib.npz (default: {DEFAULT_DATA})")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    ap.add_argument("--cifar10", type=Path, default=None,
                    help=f"CIFAR-10 logits npz for the top-label file (default: <out>/{TOPLABEL_SOURCE})")
    ap.add_argument("--n-jobs", type=int, default=2, help="threads for training (default 2; results do not depend on it)")
    args = ap.parse_args(argv)

    from threadpoolctl import threadpool_limits

    from pbr_core.predictions import softmax

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    cifar10 = args.cifar10 or out / TOPLABEL_SOURCE
    t_start = time.time()

    with np.load(args.data, allow_pickle=False) as d:
        # pycalib reads the features with np.loadtxt(..., np.float64).
        X_train = d["X_train"].astype(np.float64)
        X_test = d["X_test"].astype(np.float64)
        y_train, y_test = d["y_train"].astype(np.int64), d["y_test"].astype(np.int64)
        yb_train, yb_test = d["y_train_binary"].astype(np.int64), d["y_test_binary"].astype(np.int64)
    if X_train.shape != (16000, 60) or X_test.shape != (9090, 60):
        raise SystemExit(f"unexpected KITTI shapes {X_train.shape}, {X_test.shape}: expected (16000, 60), (9090, 60)")
    if not (np.array_equal(yb_train, (y_train > 0).astype(np.int64))
            and np.array_equal(yb_test, (y_test > 0).astype(np.int64))):
        raise SystemExit("y_*_binary is not (y_* > 0)")

    written: list[tuple[Path, str, int]] = []   # (path, kind, K)
    with threadpool_limits(limits=1, user_api="blas"):
        # Binary: the paper's KITTI task.
        for model, clf in make_classifiers(args.n_jobs).items():
            t = time.time()
            print(f"training {model} (binary) ...", flush=True)
            p = fit_predict(clf, X_train, yb_train, X_test)
            assert list(clf.classes_) == [0, 1]
            path = out / BINARY_FILES[model]
            write_table(pd.DataFrame({"p_positive": p[:, 1], "label": yb_test}), path)
            written.append((path, "binary", 2))
            print(f"    wrote {path.name} in {time.time() - t:.1f} s", flush=True)

        # Multiclass (8 KITTI classes): one model.
        t = time.time()
        print(f"training {MULTICLASS_MODEL} (8 classes) ...", flush=True)
        clf = make_classifiers(args.n_jobs)[MULTICLASS_MODEL]
        p_seen = fit_predict(clf, X_train, y_train, X_test)
        probs = np.zeros((X_test.shape[0], N_KITTI_CLASSES))
        probs[:, clf.classes_] = p_seen          # classes absent from training (class 4) keep probability 0
        probs /= probs.sum(axis=1, keepdims=True)
        cols = [f"class_{k}" for k in range(N_KITTI_CLASSES)]
        df = pd.DataFrame(probs, columns=cols)
        df["label"] = y_test
        path = out / MULTICLASS_FILE
        write_table(df, path)
        written.append((path, "multiclass", N_KITTI_CLASSES))
        print(f"    wrote {path.name} in {time.time() - t:.1f} s (classes seen in training: {clf.classes_.tolist()})",
              flush=True)

    # Top-label only: CIFAR-10 ResNet-110 (no training).
    with np.load(cifar10, allow_pickle=False) as d:
        logits, labels = d["logits"].astype(np.float64), d["labels"].astype(np.int64)
    sm = softmax(logits)
    path = out / TOPLABEL_FILE
    write_table(pd.DataFrame({"confidence": sm.max(axis=1), "predicted": sm.argmax(axis=1), "label": labels}), path)
    written.append((path, "top_label", logits.shape[1]))
    print(f"wrote {path.name} from {cifar10.name}")

    # Re-read what was written; check it; summarise.
    rows = []
    for path, kind, K in written:
        df = read_table(path)
        labels = df["label"].to_numpy(np.int64)
        if kind == "binary":
            p1 = df["p_positive"].to_numpy(np.float64)
            assert np.all((p1 >= 0) & (p1 <= 1)), path
            data = np.column_stack([1.0 - p1, p1])
        elif kind == "multiclass":
            data = df[[c for c in df.columns if c != "label"]].to_numpy(np.float64)
            worst = float(np.abs(data.sum(axis=1) - 1.0).max())
            assert worst <= 1e-6, f"{path.name}: a row sums to 1 +- {worst:.2e}"
        else:
            data = (df["confidence"].to_numpy(np.float64), df["predicted"].to_numpy(np.int64))
        rows.append(summarise(path.name, data, labels, kind, K))

    table = pd.DataFrame(rows)
    print()
    print("| file | kind | n | K | accuracy | ECE (15 bins) | ECE (B = floor(n^(1/3))) | size |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        size_kb = (out / r.file).stat().st_size / 1024
        print(f"| `{r.file}` | {r.kind} | {r.n} | {r.K} | {r.accuracy:.4f} | {r.ece_15:.4f} | "
              f"{r.ece_B:.4f} (B={r.B}) | {size_kb:.0f} KB |")
    print(f"\ntotal time {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
