"""A fake Hopsworks 5.2 server for the real ``hopsworks`` SDK: only HTTP (and HopsFS) faked.

:class:`~sdk_server.server.FakeHopsworks` holds the server state and rules;
:class:`~sdk_server.transport.FakeTransport` is a ``requests`` transport adapter
mounted on the SDK's own ``requests`` sessions for ``https://<host>:<port>/`` only; response
bodies start from the SDK repository's backend fixtures (``tests/hopsworks/fixtures``).
:func:`~sdk_server.install.serve` starts it and returns login settings.
See ``tests/hopsworks/fixtures/README.md`` for what this shows and what it does not.
"""

from sdk_server.install import FakeCluster, serve

__all__ = ["FakeCluster", "serve"]
