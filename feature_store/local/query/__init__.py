"""The query compiler of the local backend: the query spec of frozen values, its plan, the one
point-in-time join (DuckDB ``ASOF``), the partitioned and bucketed joins and the row gather."""
