"""The registry is the one source of facts about a method: what it takes, its family, its defaults.

Front ends (the CLI, the dashboard, the scripts) ask these functions instead of keeping lists of
method names or reading a class's private helpers (issue 36).
"""

from __future__ import annotations

import inspect

import pytest

from pbr_core.recalibrators import (REGISTRY, accepted_params, available_methods, default_params, method_class,
                                    method_family, methods_taking, param_names, takes)


def test_param_names_are_the_constructors_parameters() -> None:
    for name in available_methods():
        signature = inspect.signature(method_class(name).__init__)
        if name != "pbr_cv":  # a wrapper: its own settings and its estimator's, flat (below)
            assert param_names(name) == [p for p in signature.parameters if p != "self"]
        assert list(default_params(name)) == param_names(name)
    pbr = [p for p in param_names("pbr") if p != "alpha"]
    own = [p for p in inspect.signature(method_class("pbr_cv").__init__).parameters if p not in ("self", "estimator")]
    assert param_names("pbr_cv") == own[:3] + pbr + own[3:]
    assert default_params("temperature") == {"min_temperature": 1e-3, "max_temperature": 1e3}
    assert default_params("pbr")["alpha"] == 0.5


def test_takes_and_methods_taking_agree() -> None:
    assert takes("pbr", "alpha") and takes("pbr_total_app", "alpha")
    assert not takes("gp", "alpha") and not takes("temperature", "alpha") and not takes("pbr_cv", "alpha")
    assert methods_taking("alpha") == [m for m in available_methods() if takes(m, "alpha")]
    assert set(methods_taking("alpha")) == {"pbr", "pbr_total", "pbr_app", "pbr_total_app"}


def test_accepted_params_keeps_what_the_method_takes_and_drops_none() -> None:
    assert accepted_params("temperature", max_iter=200, alpha=0.5) == {}
    assert accepted_params("pbr", max_iter=200, alpha=0.5, prior_split=None) == {"max_iter": 200, "alpha": 0.5}
    assert accepted_params("vector_scaling", max_iter=200, device="cpu") == {"max_iter": 200}


def test_family_is_the_classes() -> None:
    for name in available_methods():
        assert method_family(name) == REGISTRY[name].family
    assert method_family("pbr") == "gp" and method_family("platt") == "binary"
    assert method_family("temperature") == "classical"


def test_an_unknown_method_is_named() -> None:
    for ask in (lambda: param_names("nope"), lambda: takes("nope", "alpha"), lambda: accepted_params("nope", a=1),
                lambda: method_family("nope"), lambda: default_params("nope")):
        with pytest.raises(ValueError, match="Unknown recalibration method 'nope'. Available methods: uncalibrated"):
            ask()


_HEAVY_FAMILY = '''
from pbr_core.recalibrators.base import register
from pbr_core.recalibrators.identity import Identity


@register
class HeavyTestFamily(Identity):
    method = "heavy_test_family"
    label = "A family with heavy imports (test)"
'''


def test_a_module_listed_in_lazy_modules_is_importable_by_name(tmp_path, monkeypatch) -> None:
    """The documented way to add a family with heavy imports (its module in LAZY_MODULES) makes its
    classes importable by name, its methods listed and made by name, and imports it only then."""
    import sys

    import pbr_core.recalibrators as R

    (tmp_path / "heavy_test_family.py").write_text(_HEAVY_FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    R.LAZY_MODULES.append("heavy_test_family")
    try:
        assert "heavy_test_family" not in sys.modules
        from pbr_core.recalibrators import HeavyTestFamily  # noqa: F401  (the import is the test)

        assert "heavy_test_family" in sys.modules
        assert R.HeavyTestFamily is sys.modules["heavy_test_family"].HeavyTestFamily
        assert R.heavy_test_family is sys.modules["heavy_test_family"]  # the module by its own name
        assert "heavy_test_family" in available_methods()
        assert type(R.get_recalibrator("heavy_test_family")).__name__ == "HeavyTestFamily"
        with pytest.raises(AttributeError, match="NoSuchFamily"):
            R.NoSuchFamily  # noqa: B018
    finally:
        R.LAZY_MODULES.remove("heavy_test_family")
        REGISTRY.pop("heavy_test_family", None)
        sys.modules.pop("heavy_test_family", None)


def test_method_label_says_how_a_binary_map_meets_multiclass_data() -> None:
    from pbr_core.recalibrators import method_label

    assert method_label("platt", True) == "Platt scaling (one-vs-all)"
    assert method_label("isotonic", True) == "Isotonic regression (top label)"
    assert method_label("venn_abers_cross", True) == "Venn-Abers (cross) (top label)"
    assert method_label("isotonic") == "Isotonic regression"  # binary data: one map of p(y=1)
    assert method_label("temperature", True) == "Temperature scaling"
