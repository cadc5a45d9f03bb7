"""``pbr-calib methods``: the registered methods and their parameters (the registry's facts)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pbr_core.cli._common import EXIT_OK


def methods_table() -> list[dict[str, Any]]:
    """One entry per registered method: name, class, what it works on, default parameters."""
    from pbr_core.recalibrators import REGISTRY, available_methods, default_params

    out = []
    for name in available_methods():
        cls = REGISTRY[name]
        summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        params = default_params(name)
        out.append({
            "method": name,
            "class": cls.__name__,
            "input": _input_words(cls, params),
            "params": params,
            "summary": summary,
        })
    return out


def cmd_methods(args: argparse.Namespace) -> int:
    rows = methods_table()
    if args.format == "json":
        print(json.dumps(rows, indent=2, default=str))
        return EXIT_OK
    w = max(len(r["method"]) for r in rows)
    for r in rows:
        params = ", ".join(f"{k}={v!r}" for k, v in r["params"].items()) or "-"
        print(f"{r['method']:<{w}}  {r['class']}({params})")
        print(f"{'':<{w}}  {r['summary']}")
    return EXIT_OK


def _input_words(cls: Any, params: dict[str, Any]) -> str:
    """What a method maps: a binary map's probability (per class one-vs-all, or the top label's), else
    scores or probabilities."""
    if cls.family == "binary":
        return ("p(y=1); for K > 2 the top label's probability" if params.get("multiclass") == "top_label"
                else "p per class (one-vs-all for K > 2)")
    return "scores (logits or log p)" if cls.uses == "scores" else "probabilities"
