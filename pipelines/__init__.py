"""The four pipelines, and nothing else: :mod:`.feature`, :mod:`.training_dataset`,
:mod:`.training` and :mod:`.model_validation`, each a plain ``run(project, config) -> ref``.

They talk to each other only through feature groups, training-dataset versions and the model
registry; no pipeline imports another, and nothing but the application (``fstrain.cli``,
``fstrain.tools``, ``fstrain.serve``) imports a pipeline. ``pipelines.cli`` and
``pipelines.jobs`` are compatibility re-exports for deployed Hopsworks jobs (one release).
"""
