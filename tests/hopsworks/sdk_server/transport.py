"""``FakeTransport``: a ``requests`` transport adapter that answers from :class:`FakeHopsworks`.

Mounted on the SDK's own ``requests.Session`` for one ``https://host:port/`` prefix, so every
byte the SDK sends is prepared by ``requests`` exactly as for a real cluster; only the socket
is replaced. Multipart uploads (the dataset API) are decoded with ``requests``' own parser
counterpart (:mod:`email`), JSON bodies with :mod:`json`.
"""

from __future__ import annotations

import json
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

if TYPE_CHECKING:  # pragma: no cover
    from sdk_server.server import FakeHopsworks


class Call:
    """One HTTP request as the server sees it."""

    def __init__(self, prepared: requests.PreparedRequest) -> None:
        url = urlsplit(prepared.url or "")
        self.method = (prepared.method or "GET").upper()
        self.path = unquote(url.path)
        self.segments = [unquote(s) for s in url.path.split("/") if s]
        self.query: dict[str, Any] = {}
        for key, value in parse_qsl(url.query, keep_blank_values=True):
            self.query.setdefault(key, []).append(value)
        self.headers = dict(prepared.headers or {})
        body = prepared.body
        self.raw: bytes = body.encode() if isinstance(body, str) else (body or b"")
        self.files: dict[str, bytes] = {}
        self.form: dict[str, str] = {}
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("multipart/form-data"):
            self._parse_multipart(ctype)

    def q(self, key: str, default: Any = None) -> Any:
        """The first value of query parameter ``key``."""
        values = self.query.get(key)
        return values[0] if values else default

    def json(self) -> Any:
        return json.loads(self.raw.decode()) if self.raw else None

    def _parse_multipart(self, ctype: str) -> None:
        message = BytesParser(policy=email_policy).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + self.raw
        )
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if part.get_filename() is not None:
                self.files[name] = payload
            else:
                self.form[name] = payload.decode()


class FakeTransport(BaseAdapter):
    """Routes each prepared request to the fake server and wraps its answer in a Response."""

    def __init__(self, server: FakeHopsworks) -> None:
        super().__init__()
        self.server = server

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        call = Call(request)
        status, body, headers = self.server.handle(call)
        response = requests.Response()
        response.status_code = status
        response.request = request
        response.url = request.url
        response.reason = "OK" if status < 400 else "Error"
        response.encoding = "utf-8"
        if isinstance(body, bytes):
            content = body
            headers = {"Content-Type": "application/octet-stream", **headers}
        elif body is None:
            content = b""
        else:
            content = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **headers}
        response.headers = CaseInsensitiveDict(headers)
        response._content = content
        response.raw = _Raw(content)
        return response

    def close(self) -> None:
        return None


class _Raw:
    """Enough of a urllib3 response for ``iter_content``/``raw.read`` (streamed downloads)."""

    def __init__(self, content: bytes) -> None:
        self._content = content
        self._pos = 0

    def read(self, amt: int | None = None, decode_content: bool = True) -> bytes:
        end = len(self._content) if amt is None else self._pos + amt
        chunk = self._content[self._pos:end]
        self._pos += len(chunk)
        return chunk

    def stream(self, amt: int = 65536, decode_content: bool = True):
        while self._pos < len(self._content):
            yield self.read(amt)

    def close(self) -> None:
        return None

    def release_conn(self) -> None:
        return None
