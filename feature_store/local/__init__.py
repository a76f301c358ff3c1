"""The embedded (local) backend of the feature store: feature groups as Delta Lake tables,
queries and point-in-time joins in DuckDB over Arrow, catalog metadata in one transactional
SQLite file, training-dataset versions as pinned, content-hashed split files. Only the
composition root (:func:`fstrain.login`) constructs it."""
