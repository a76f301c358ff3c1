"""The ``fstrain`` command line: every command parses its arguments and config, connects to the
backend through the composition root, and calls one pipeline's ``run`` (or a tool).

:mod:`fstrain.cli.app` is the root command (``fstrain``, :func:`fstrain.cli.app.main`); the
sub-commands live beside it: :mod:`.registry` (``fstrain registry``), :mod:`.browse`
(``fstrain fg|fv|td``), :mod:`.jobs` (``fstrain jobs``, Hopsworks jobs). User errors print one
line and exit 2 (:mod:`.errors`).
"""
