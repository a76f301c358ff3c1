"""The Hopsworks SDK's objects the embedded store needs to *create*, wired in by the root.

The local backend never imports the SDK (an import-linter contract): it runs the SDK objects a
user hands it by duck typing (:mod:`feature_store.core.udf`). Two things need the SDK itself,
and the composition root (:mod:`fstrain.project`) passes this module to the local feature store
for them: rebuilding a stored ``@udf`` from its JSON, and listing the SDK's built-in
transformation functions. The SDK is imported only when one of these is called.
"""

from __future__ import annotations

from typing import Any

__all__ = ["builtin_transformation_functions", "load_udf",
           "model_dependent_transformation_functions"]


def load_udf(data: dict[str, Any]) -> Any:
    """An ``hsfs.hopsworks_udf.HopsworksUdf`` from its JSON (``json.loads(udf.json())``)."""
    from hsfs.hopsworks_udf import HopsworksUdf

    return HopsworksUdf.from_response_json(dict(data))


def builtin_transformation_functions(featurestore_id: int = 1) -> list[Any]:
    """The SDK's built-ins (``hsfs.builtin_transformations``) as
    ``hsfs.transformation_function.TransformationFunction`` objects, version 1, sorted by name
    (what ``fs.get_transformation_functions()`` lists on a cluster)."""
    from hsfs import builtin_transformations
    from hsfs.hopsworks_udf import HopsworksUdf
    from hsfs.transformation_function import TransformationFunction

    udfs = sorted((name, obj) for name, obj in vars(builtin_transformations).items()
                  if isinstance(obj, HopsworksUdf))
    return [TransformationFunction(featurestore_id=featurestore_id, hopsworks_udf=obj, version=1)
            for _, obj in udfs]


def model_dependent_transformation_functions(
    transformations: list[Any], statistics: dict[str, Any], featurestore_id: int = 1
) -> list[Any]:
    """``hsfs`` model-dependent ``TransformationFunction`` objects for a view's fitted
    transformations (local built-ins become the SDK's built-in of the same name), with their
    statistics set as the SDK sets them for batch scoring."""
    from hsfs import builtin_transformations
    from hsfs.transformation_function import TransformationFunction, TransformationType

    from feature_store.core.udf import UdfTransformation, sdk_statistics

    out = []
    for tf in transformations:
        if isinstance(tf, UdfTransformation):
            udf = tf.udf
        else:
            udf = getattr(builtin_transformations, tf.name)(tf.feature)
        function = TransformationFunction(featurestore_id=featurestore_id, hopsworks_udf=udf,
                                          version=1,
                                          transformation_type=TransformationType.MODEL_DEPENDENT)
        sdk_stats = sdk_statistics(tf, statistics[tf.key])
        if udf.statistics_features:
            function.hopsworks_udf.transformation_statistics = sdk_stats
        out.append(function)
    return out
