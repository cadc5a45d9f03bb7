"""JSON Schemas of what ``pbr-calib`` writes for programs to read, shipped in the package.

``evaluate.schema.json`` (JSON Schema draft 2020-12) describes ``pbr-calib evaluate --format json``
in memory and streamed, with ``--n-bins``, ``--curve``, ``--by``, ``--find-slices``,
``--libraries`` and the calibration gates (``--fail-above``, ``--require-below``,
``--max-group-gap``). It lists every field and forbids others (``additionalProperties: false`` at
every level), so that a renamed field fails validation: a CI job that reads the JSON can pin it
(``jsonschema.validate(output, evaluate_schema())``). tests/test_cli_schema.py validates real
outputs against it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["EVALUATE_SCHEMA", "evaluate_schema"]

#: The schema's file name inside this package.
EVALUATE_SCHEMA = "evaluate.schema.json"


def evaluate_schema() -> dict[str, Any]:
    """The JSON Schema of ``pbr-calib evaluate --format json`` (a new dict at every call)."""
    return json.loads(resources.files(__name__).joinpath(EVALUATE_SCHEMA).read_text(encoding="utf-8"))
