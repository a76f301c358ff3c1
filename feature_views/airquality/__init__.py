"""The ``airquality`` use case: R airquality: daily ozone (label, past-only lags) and weather.

:mod:`.view` builds its feature view and holds the stages' defaults (``USE_CASE``);
:mod:`.source` loads its data offline.
"""
