"""Every plot is a PNG that decodes, drawn without pyplot or a global backend switch."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from validation import plots

PNG = b"\x89PNG\r\n\x1a\n"


def _decode(png: bytes) -> np.ndarray:
    from matplotlib.image import imread

    assert png.startswith(PNG)
    img = imread(io.BytesIO(png), format="png")
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    return img


def test_standard_plots_are_decodable_pngs(full_scorecard):
    fs = full_scorecard
    images = plots.standard_plots(
        y_true=fs["y"], y_score=fs["score"], confusion=fs["metrics"]["confusion_matrix"],
        threshold=fs["threshold"], explanation=fs["explanation"], bias=fs["bias"],
    )
    assert set(images) == {"roc", "pr", "calibration", "confusion_matrix", "shap_importance",
                           "shap_beeswarm", "slices_sex", "slices_race", "slices_age"}
    for png in images.values():
        img = _decode(png)
        assert img[..., :3].std() > 0.01  # not a blank image


def test_plots_are_deterministic(full_scorecard):
    fs = full_scorecard
    a = plots.shap_beeswarm_png(fs["explanation"], seed=1)
    assert a == plots.shap_beeswarm_png(fs["explanation"], seed=1)
    assert plots.roc_png(fs["y"], fs["score"]) == plots.roc_png(fs["y"], fs["score"])


@pytest.mark.parametrize("fn", [plots.roc_png, plots.pr_png])
def test_undefined_curves_render_an_explanation_instead_of_raising(fn):
    png = fn([0, 0, 0], [0.1, 0.5, 0.9])
    _decode(png)
    assert png != fn([0, 1, 0], [0.1, 0.5, 0.9])


def test_calibration_refuses_non_probabilities_with_a_message():
    png = plots.calibration_png([0, 1, 1], [-1.0, 2.0, 0.5])
    _decode(png)
    assert png != plots.calibration_png([0, 1, 1], [0.1, 0.9, 0.5])


def test_module_does_not_import_pyplot_or_switch_backend():
    code = (
        "import numpy as np, sys, matplotlib\n"
        "before = matplotlib.rcParams._get_backend_or_none()\n"
        "from validation import plots\n"
        "plots.roc_png(np.array([0, 1, 0, 1]), np.array([.1, .8, .3, .6]))\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'\n"
        "assert matplotlib.rcParams._get_backend_or_none() == before\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
