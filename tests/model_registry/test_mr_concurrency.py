"""Two processes saving the same model name at once get distinct, loadable versions."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from model_registry.local.registry import LocalModelRegistry

_WORKER = textwrap.dedent(
    """
    import pathlib, sys
    from model_registry.local.registry import LocalModelRegistry

    root, tag, n = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    registry = LocalModelRegistry(root)
    src = root.parent / f"src_{tag}"
    src.mkdir()
    for i in range(n):
        (src / "weights.txt").write_text(f"{tag}-{i}")
        model = registry.python.create_model("shared", metrics={"i": i})
        model.save(src)
        print(model.version, flush=True)
    """
)


def test_two_processes_twenty_saves_each_get_forty_distinct_versions(tmp_path: Path):
    root = tmp_path / "model_registry"
    LocalModelRegistry(root)  # create the index before the race on the first version
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(root), tag, "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    seen = [[int(v) for v in out.split()] for out, _ in outputs]
    assert all(len(s) == 20 for s in seen)
    assert sorted(seen[0] + seen[1]) == list(range(1, 41))

    registry = LocalModelRegistry(root)
    models = registry.get_models("shared")
    assert [m.version for m in models] == list(range(1, 41))
    contents = set()
    for model in models:
        folder = Path(model.download())
        contents.add((folder / "weights.txt").read_text())
    assert contents == {f"{t}-{i}" for t in "ab" for i in range(20)}
    assert not any((root / ".tmp").iterdir())
