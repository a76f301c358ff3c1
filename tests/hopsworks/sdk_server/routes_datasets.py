"""Dataset (file) API routes: none yet; feature-group Delta files are written by the SDK."""
