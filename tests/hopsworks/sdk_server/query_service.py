"""A fake Hopsworks Query Service: a real ``pyarrow.flight`` server over TLS for the SDK's
own flight client (``hsfs.core.arrow_flight_client``).

On a cluster the Python engine reads every offline query (``Query.read``, ``fg.read()``,
``get_batch_data``, in-memory training data) and materialized training-dataset files through
the Query Service ("flyingduck", Arrow Flight on port 5005). The SDK finds it through the
cluster variables ``enable_flyingduck``, ``loadbalancer_external_domain_feature_query`` and
``service_discovery_domain``, and connects with the project's certificates (``GET
/project/{id}/credentials``) and ``override_hostname=flyingduck.service.<domain>``. This
server speaks that protocol with real TLS:

* actions ``healthcheck`` and ``get-version`` (a versioned server: no certificate registration);
* ``get_flight_info``/``do_get`` for a **command** (the ``hqsPayload`` the fake REST server
  built for ``PUT /featurestores/query?hqs=true``: the query as the SDK sent it) — run by the
  same pandas engine as the training-dataset job (:func:`sdk_server.td_job.run_query`),
  point-in-time joins and root filters (:mod:`sdk_server.filters`, e.g. the event-time window
  of ``get_batch_data``) included, time travel (``as_of``) refused rather than ignored;
* ``get_flight_info``/``do_get`` for a **path** (a training-dataset split folder): its parquet.

The SDK hard-codes port 5005, so the server binds ``127.0.0.N:5005`` with the first free
``N``; the SDK is told that address as the external domain.

What this does **not** show: the real service's DuckDB SQL (the payload here is the query JSON,
not the backend's SQL), its filter push-down, queueing, and certificate registration.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import flight

DOMAIN = "fake.consul"
HOSTNAME = f"flyingduck.service.{DOMAIN}"
PORT = 5005


def _pem(obj: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    if hasattr(obj, "private_bytes"):
        return obj.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.TraditionalOpenSSL,
                                 serialization.NoEncryption())
    return obj.public_bytes(serialization.Encoding.PEM)


def _cert(subject: str, key: Any, issuer: tuple[str, Any] | None, dns: list[str]) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name = name if issuer is None else x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, issuer[0])])
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(days=1))
               .not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None),
                              critical=True))
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    return builder.sign(key if issuer is None else issuer[1], hashes.SHA256())


def make_certificates() -> dict[str, bytes]:
    """A CA, the server's certificate for ``flyingduck.service.<domain>`` and a client's."""
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1())
                                      for _ in range(3))
    ca = _cert("fake hopsworks CA", ca_key, None, [])
    return {"ca": _pem(ca),
            "server_cert": _pem(_cert(HOSTNAME, server_key, ("fake hopsworks CA", ca_key),
                                      [HOSTNAME])),
            "server_key": _pem(server_key),
            "client_cert": _pem(_cert("fstrain_ci_user", client_key,
                                      ("fake hopsworks CA", ca_key), [])),
            "client_key": _pem(client_key)}


def free_loopback() -> str:
    """The first ``127.0.0.N`` whose port 5005 is free (the SDK's port is fixed)."""
    for n in range(2, 250):
        host = f"127.0.0.{n}"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, PORT))
            except OSError:
                continue
            return host
    raise RuntimeError("no loopback address with a free port 5005 for the fake Query Service")


class FakeQueryService(flight.FlightServerBase):
    """Answers the SDK's flight client from the fake cluster's state and HopsFS."""

    def __init__(self, cluster: Any, host: str, certificates: dict[str, bytes]) -> None:
        super().__init__(f"grpc+tls://{host}:{PORT}",
                         tls_certificates=[(certificates["server_cert"],
                                            certificates["server_key"])])
        self.cluster = cluster
        self.reads: list[dict[str, Any]] = []  # what was asked, for assertions
        self._tickets: dict[bytes, pa.Table] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return [("healthcheck", "liveness"), ("get-version", "server version")]

    def do_action(self, context: Any, action: Any) -> list[Any]:
        if action.type == "healthcheck":
            return []
        if action.type == "get-version":
            return [flight.Result(pa.py_buffer(b"5.2.1-fstrain-fake"))]
        raise flight.FlightServerError(f"fake Query Service: unknown action {action.type!r}")

    def get_flight_info(self, context: Any, descriptor: Any) -> Any:
        table = self._answer(descriptor)
        ticket = f"t{next(self._ids)}".encode()
        with self._lock:
            self._tickets[ticket] = table
        return flight.FlightInfo(table.schema, descriptor,
                                 [flight.FlightEndpoint(ticket, [])], table.num_rows, -1)

    def do_get(self, context: Any, ticket: Any) -> Any:
        with self._lock:
            table = self._tickets.pop(ticket.ticket)
        return flight.RecordBatchStream(table)

    def _answer(self, descriptor: Any) -> pa.Table:
        if descriptor.descriptor_type == flight.DescriptorType.PATH:
            path = "/".join(p.decode() for p in descriptor.path)
            self.reads.append({"path": path})
            return _read_path(self.cluster.state.hopsfs, path)
        payload = json.loads(descriptor.command.decode())
        self.reads.append({"query": payload})
        with self.cluster._lock:  # the REST server's state, read consistently
            return run_payload(self.cluster.state, payload)


def _read_path(hopsfs: Path, path: str) -> pa.Table:
    from sdk_server.hopsfs import local_path

    folder = local_path(hopsfs, path)
    files = sorted(folder.rglob("*.parquet")) if folder.is_dir() else [folder]
    if not files or not files[0].exists():
        raise flight.FlightServerError(f"No data found for path {path}. Detail: no parquet files")
    return pa.concat_tables([pq.read_table(f) for f in files])


def run_payload(state: Any, payload: dict[str, Any]) -> pa.Table:
    """The rows of a query payload (see :func:`hqs_payload`), as the Query Service returns
    them: the same engine as the training-dataset job, root filters included; time travel
    (``leftFeatureGroupStart/EndTime``, commit times) is refused, not ignored."""
    from sdk_server.td_job import run_query
    from sdk_server.views import resolve

    query = payload["query"]
    travel = [k for k in ("leftFeatureGroupStartTime", "leftFeatureGroupEndTime")
              if query.get(k) not in (None, "", 0)]
    if travel:
        raise flight.FlightServerError(f"fake Query Service: time travel ({travel}) is not served")
    try:
        frame, _ = run_query(state.hopsfs, resolve(state, query))
    except ValueError as exc:
        raise flight.FlightServerError(f"fake Query Service: {exc}") from None
    return pa.Table.from_pandas(frame, preserve_index=False)


def hqs_payload(query: dict[str, Any]) -> str:
    """The opaque payload ``PUT /featurestores/query?hqs=true`` answers with: the query as the
    SDK sent it (the real service's payload carries the backend's SQL instead)."""
    return json.dumps({"query": query})
