"""The ``flights`` use case: nycflights13 flights, weather, planes, airlines.

:mod:`.view` builds its feature view and holds the stages' defaults (``USE_CASE``);
:mod:`.source` loads its data offline.
"""
