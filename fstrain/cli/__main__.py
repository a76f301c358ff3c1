"""``python -m fstrain.cli``: the ``fstrain`` command."""

from fstrain.cli.app import main

main()
