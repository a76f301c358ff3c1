"""The Hopsworks backend: thin wrappers over the ``hopsworks`` SDK (imported lazily).

``feature_store.login(backend="hopsworks", ...)`` → :func:`connection.login` →
:class:`project.HopsworksProject`. Every SDK call goes through the table in
:mod:`feature_store.hopsworks.sdk_calls`; what was verified and how is in
``docs/hopsworks/backend.md``.
"""
