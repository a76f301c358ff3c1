"""Storage of the local backend: Delta Lake tables and their snapshots, the DuckDB engine over
them, the write path (schema rules, writer, group storage), statistics, options and the mapping
of storage failures onto the fstrain error family."""
