"""Files of a Hopsworks project written and read through the SDK's dataset API.

:func:`replace_remote` puts a local file into a HopsFS folder under its name, replacing a file
there only once the new bytes are uploaded (to a temporary name beside it, then moved over the
old one: ``DatasetApi.upload(overwrite=True)`` deletes the old file first and loses it if the
upload then fails). :func:`fetch_remote` downloads a file, or says it is not there.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from feature_store.hopsworks.sdk_calls import sdk_call


def replace_remote(project: Any, local: Path, remote_dir: str, *, owner: str,
                   scratch: Path) -> None:
    """Upload ``local`` into ``remote_dir`` (its missing folders created, outermost first) as
    ``local.name``; ``scratch`` is a local folder for the temporary copy."""
    datasets = project.get_dataset_api()
    missing, folder = [], remote_dir
    while folder and not sdk_call(datasets, "DatasetApi.exists", folder, _owner=owner):
        missing.append(folder)
        folder = folder.rsplit("/", 1)[0] if "/" in folder.strip("/") else ""
    for folder in reversed(missing):
        sdk_call(datasets, "DatasetApi.mkdir", folder, _owner=owner)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        part = Path(tmp) / f".{local.name}.{uuid.uuid4().hex}.part"
        shutil.copyfile(local, part)
        sdk_call(datasets, "DatasetApi.upload", str(part), remote_dir, overwrite=False,
                 _owner=owner)
    sdk_call(datasets, "DatasetApi.move", f"{remote_dir}/{part.name}",
             f"{remote_dir}/{local.name}", overwrite=True, _owner=owner)


def fetch_remote(project: Any, remote: str, *, owner: str, scratch: Path) -> bytes | None:
    """The bytes of the project file ``remote``, or None when there is none."""
    datasets = project.get_dataset_api()
    if not sdk_call(datasets, "DatasetApi.exists", remote, _owner=owner):
        return None
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        path = sdk_call(datasets, "DatasetApi.download", remote, local_path=tmp,
                        overwrite=True, _owner=owner)
        return Path(path).read_bytes()
