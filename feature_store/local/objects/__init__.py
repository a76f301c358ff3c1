"""The local backend's user-facing objects, the top layer: the feature store, feature groups,
queries, feature views (with their operations and feature logging), saved transformation
functions and tags. They hold the Hopsworks-compatible API and hand values to the layers below."""
