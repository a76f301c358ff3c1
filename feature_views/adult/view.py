"""Adult census: does a person earn more than 50K a year?

Root ``adult_employment``; ``adult_demographics`` (tagged ``pii``) contributes only ``sex``,
``race`` and ``age`` as *training helper columns*: they never reach the model (the view
prohibits ``pii`` features) but are returned for bias tests. Stratified split on the label.
"""

from __future__ import annotations

from typing import Any

from feature_views import UseCase

NAME = "adult_income"
VERSION = 1
HELPERS = ["sex", "race", "age"]


def build(fs: Any) -> Any:
    """Get or create the ``adult_income`` feature view."""
    employment = fs.get_feature_group("adult_employment", 1)
    demographics = fs.get_feature_group("adult_demographics", 1)
    query = employment.select_except(["source_split"]).join(demographics.select(HELPERS))
    return fs.get_or_create_feature_view(
        NAME, VERSION, query, labels=["income_over_50k"], training_helper_columns=HELPERS,
        prohibited_tags=["pii"],
        description="Income > 50K; demographics only as helper columns for bias slices.",
    )


USE_CASE = UseCase(
    name="adult",
    description=__doc__.splitlines()[0],
    feature_view_name=NAME,
    feature_view_version=VERSION,
    build_feature_view=build,
    split={"split": "stratified", "validation_size": 0.15, "test_size": 0.2, "seed": 42},
    model={"model": "xgboost", "imbalance": "scale_pos_weight",
           "params": {"n_estimators": 300, "max_depth": 5, "learning_rate": 0.1}},
    gates=("roc_auc >= 0.85", "better_than_baseline", "max_abs_dp_difference <= 0.25",
           "disparate_impact_ratio[sex] >= 0.8"),
    slice_bands={"age": [30, 50, 65]},
    slice_intersections=(("sex", "race"),),
    model_name="adult_income",
    demo={"model": {"params": {"n_estimators": 150}}},
)
