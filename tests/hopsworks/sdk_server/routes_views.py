"""Feature view and training-dataset routes: none yet (requests to them answer 501)."""
