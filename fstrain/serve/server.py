"""Running the application under uvicorn (``fstrain serve``, ``make serve``)."""

from __future__ import annotations

from fstrain.serve.app import create_app
from fstrain.serve.context import ServeSettings


def serve(settings: ServeSettings) -> None:
    """Check the settings, build the application and serve it until interrupted.

    uvicorn's own proxy-header handling stays off: the application believes forwarded
    addresses only from ``settings.proxy`` (:class:`fstrain.serve.security.ProxyView`).
    """
    import uvicorn

    app = create_app(settings.check())
    uvicorn.run(app, host=settings.host, port=settings.port, proxy_headers=False,
                server_header=False, date_header=True, log_level="info", access_log=True)
