"""``fstrain serve`` under load: concurrent readers of a version page, against a static file.

Builds the adult store with the real pipelines (3,000 rows, one validated model; or uses
``--root`` with ``--model NAME:VERSION``), enrols a viewer, and starts one uvicorn server on
loopback in a subprocess. That server serves the application and, beside it, a static file of
exactly the version page's size. Then ``--readers`` threads, each signed in with its own
session, request the version page for ``--seconds`` seconds (every request re-reads the store:
the registry index, the manifest, the history and its hashes), and then the static file for
as long. Reported: requests, requests/s, p50 and p95 latency of each, and the page/static
ratios (what the live reads and the template cost over serving bytes).

Bounded: loopback only (the server binds 127.0.0.1, the readers refuse any other address), a
fixed time, at most ``--max-requests`` per phase, and the server is stopped at the end.

    python bench/serve_load.py [--readers 20] [--seconds 30] [--root R --model NAME:V]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

PASSWORD = "a long benchmark passphrase"
HOST = "127.0.0.1"


def build_adult(root: Path) -> str:
    """The adult store the tests use: features, a training dataset, a model, one validation."""
    import feature_store
    from pipelines import feature, model_validation, training, training_dataset

    project = feature_store.login(backend="local", root=root)
    feature.run(project, feature.FeaturePipelineConfig(use_case="adult", sample=3000))
    td = training_dataset.run(project, training_dataset.TrainingDatasetConfig(use_case="adult"))
    ref = training.run(project, training.TrainingPipelineConfig(
        use_case="adult", training_dataset_version=td.version,
        model={"params": {"n_estimators": 60}}))
    model_validation.run(project, model_validation.ModelValidationConfig(
        model_name=ref.name, version=ref.version, bootstrap_resamples=30, shap_samples=30))
    return f"{ref.name}:{ref.version}"


def serve_only(root: Path, port: int, static_dir: Path) -> None:
    """The server process: the application plus ``/bench-static`` (the same-size file)."""
    import uvicorn
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    from fstrain.serve import ServeSettings, create_app

    app = create_app(ServeSettings(root=root, host=HOST, port=port),
                     extra_routes=[Mount("/bench-static", StaticFiles(directory=static_dir))])
    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _signed_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    page = client.get("/login").text
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token, "no login form"
    response = client.post("/login", data={"csrf": token.group(1), "username": "bench",
                                           "password": PASSWORD})
    assert response.status_code in (200, 303), response.text[:300]
    return client


def _phase(clients: list[httpx.Client], path: str, seconds: float,
           max_requests: int) -> list[float]:
    """Every reader requests ``path`` in a loop until the time or the request budget is used."""
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    budget = [max_requests]

    def reader(client: httpx.Client) -> None:
        while time.monotonic() < deadline:
            with lock:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            start = time.perf_counter()
            response = client.get(path)
            took = time.perf_counter() - start
            if response.status_code != 200:
                raise AssertionError(f"{path}: HTTP {response.status_code}")
            with lock:
                latencies.append(took)

    threads = [threading.Thread(target=reader, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def _summary(latencies: list[float], seconds: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {"requests": len(ordered), "per_second": len(ordered) / seconds,
            "p50_ms": 1000 * statistics.median(ordered),
            "p95_ms": 1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--model", default=None, help="NAME:VERSION (with --root)")
    parser.add_argument("--serve-only", nargs=3, metavar=("ROOT", "PORT", "STATIC"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_only:
        serve_only(Path(args.serve_only[0]), int(args.serve_only[1]), Path(args.serve_only[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, tmp: Path) -> None:
    """Build or open the store, start the server, measure both phases, stop the server."""
    from fstrain.serve.users import UserStore

    root = args.root or tmp / "store"
    started = time.perf_counter()
    model = args.model or build_adult(root)
    print(f"store ready in {time.perf_counter() - started:.0f} s: {model} under {root}")
    if UserStore(root).get("bench") is None:
        UserStore(root).add("bench", "viewer", PASSWORD)
    static = tmp / "static"
    static.mkdir()
    port = _free_port()
    base = f"http://{HOST}:{port}"
    server = subprocess.Popen([sys.executable, __file__, "--serve-only", str(root), str(port),
                               str(static)])
    try:
        _wait(base, server)
        name, _, version = model.partition(":")
        page_path = f"/models/{name}/{version}"
        clients = [_signed_in(base) for _ in range(args.readers)]
        size = len(clients[0].get(page_path).content)
        (static / "page.html").write_bytes(b"x" * size)
        page = _phase(clients, page_path, args.seconds, args.max_requests)
        flat = _phase(clients, "/bench-static/page.html", args.seconds, args.max_requests)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(page, flat, args, size)


def _wait(base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("the server stopped while starting")
        try:
            httpx.get(base + "/login", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise SystemExit("the server did not start within 60 s")


def report(page: list[float], flat: list[float], args: argparse.Namespace, size: int) -> None:
    """Print both phases and the ratios, then one JSON line."""
    a, b = _summary(page, args.seconds), _summary(flat, args.seconds)
    print(f"{args.readers} readers x {args.seconds:.0f} s each phase, page of {size:,} bytes")
    for label, s in (("version page", a), ("static file ", b)):
        print(f"  {label}: {s['requests']:6d} requests, {s['per_second']:7.1f}/s, "
              f"p50 {s['p50_ms']:7.1f} ms, p95 {s['p95_ms']:7.1f} ms")
    ratios = {"p50": a["p50_ms"] / b["p50_ms"], "p95": a["p95_ms"] / b["p95_ms"],
              "throughput": b["per_second"] / a["per_second"]}
    print(f"  page / static: p50 {ratios['p50']:.1f}x, p95 {ratios['p95']:.1f}x, "
          f"throughput {ratios['throughput']:.1f}x lower")
    print(json.dumps({"readers": args.readers, "seconds": args.seconds, "bytes": size,
                      "page": a, "static": b, "ratio": ratios}))


if __name__ == "__main__":
    main()
