"""The fits on every row of a dataset make their recalibrator with ``from_state`` (the state checked as a
saved file's is), not by writing its fitted attributes from outside (issue 36)."""

from __future__ import annotations

import numpy as np
import pytest

from pbr_core.recalibrators import PlattScaling, TemperatureScaling


def test_from_state_is_a_checked_fitted_recalibrator() -> None:
    rec = TemperatureScaling.from_state({"temperature": 1.5}, n_classes=3, input_type="logits", class_names=["a", "b", "c"])
    z = np.array([[1.0, 0.0, -1.0], [0.0, 2.0, 0.0]])
    expected = np.exp(z / 1.5) / np.exp(z / 1.5).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(rec.predict_proba(z, input_type="logits"), expected)
    assert rec.is_fitted and rec.class_names_ == ("a", "b", "c") and rec.to_dict()["state"]["temperature"] == 1.5
    with pytest.raises(ValueError, match="TemperatureScaling.from_state: state.temperature must be a finite number above 0"):
        TemperatureScaling.from_state({"temperature": -1.0}, n_classes=3, input_type="logits")
    with pytest.raises(ValueError, match="n_classes"):
        TemperatureScaling.from_state({"temperature": 1.0}, n_classes=1, input_type="logits")
    maps = [{"slope": 2.0, "intercept": -1.0, "targets": "platt"}]
    platt = PlattScaling.from_state({"maps": maps}, n_classes=2, input_type="probabilities", targets="platt")
    assert platt.maps_ == maps and platt.targets == "platt"
    with pytest.raises(ValueError, match="state.maps must be a list of 1 map"):
        PlattScaling.from_state({"maps": maps * 2}, n_classes=2, input_type="probabilities")
