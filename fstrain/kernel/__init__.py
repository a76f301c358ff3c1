"""fstrain's kernel: what every layer may use and that depends on no other fstrain code.

- :mod:`~fstrain.kernel.errors`: the one exception root and its subclasses;
- :mod:`~fstrain.kernel.timeutil`: the UTC timestamp rule;
- :mod:`~fstrain.kernel.canonical_json`: strict, deterministic JSON;
- :mod:`~fstrain.kernel.names`: naming rules for groups, views and features;
- :mod:`~fstrain.kernel.window`: the scheduled-run window (``HOPS_START_TIME``/``HOPS_END_TIME``);
- :mod:`~fstrain.kernel.store_root`: where a project's files live on this machine.
"""
