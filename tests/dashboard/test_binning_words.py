"""The step-function methods' settings in words (a saved file's description, the report's settings)."""

from __future__ import annotations

from dashboard import texts


def test_multiclass_and_floor_in_words() -> None:
    assert texts.PARAM_LABELS["multiclass"] == "multiclass data"
    assert "top class" in texts.param_value("multiclass", "top_label")
    assert "one-vs-all" in texts.param_value("multiclass", "one_vs_all")
    assert texts.param_value("floor", None) == "1/(n+1) for n fit rows"
    assert texts.param_value("floor", 0.0) == "0"


def test_dirichlet_and_centred_in_words() -> None:
    assert texts.PARAM_LABELS["reg_lambda"] == "off-diagonal penalty (λ)"
    assert texts.param_value("reg_lambda", None).startswith("automatic (1 up to 10 classes")
    assert texts.param_value("reg_mu", 2.5) == "2.5"
    assert texts.param_value("centred", True) == "yes"
