"""The local model registry: a SQLite index plus one folder per model version."""
