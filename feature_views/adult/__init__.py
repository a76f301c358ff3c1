"""The ``adult`` use case: UCI Adult census: demographics (PII) and employment.

:mod:`.view` builds its feature view and holds the stages' defaults (``USE_CASE``);
:mod:`.source` loads its data offline.
"""
