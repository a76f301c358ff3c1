"""The ``mnist`` use case: MNIST 5k written as PNG files, indexed by path.

:mod:`.view` builds its feature view and holds the stages' defaults (``USE_CASE``);
:mod:`.source` loads its data offline.
"""
