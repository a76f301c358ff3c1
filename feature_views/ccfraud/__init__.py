"""The ``ccfraud`` use case: seeded synthetic credit-card fraud (transactions, cc_fraud, details).

:mod:`.view` builds its feature view and holds the stages' defaults (``USE_CASE``);
:mod:`.source` loads its data offline.
"""
