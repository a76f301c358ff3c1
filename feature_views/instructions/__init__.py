"""The ``instructions`` use case: HumanEval's problems as instruction/response records.

:mod:`.view` builds its feature view and holds the stages' defaults (``USE_CASE``);
:mod:`.source` loads its data offline.
"""
