"""Backend-neutral feature-store logic, used by the local and the Hopsworks backends alike.

Splits (:mod:`.splits`), model-dependent transformations (:mod:`.transformations`), the split
content hash (:mod:`.content_hash`), seeds (:mod:`.seeds`) and Great Expectations suites for
ingestion (:mod:`.expectations`). Nothing here reads or writes storage.
"""
