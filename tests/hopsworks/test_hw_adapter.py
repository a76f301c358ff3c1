"""The adapter's own logic (extensions, translations) against small fake SDK objects.

The fakes take the same parameters as the SDK; ``sdk_call`` checks every call's shape against
the table, and the conformance test checks the table against the real SDK.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from feature_store.hopsworks.feature_store import (
    HopsworksFeatureGroup,
    HopsworksFeatureStore,
    HopsworksQuery,
)
from feature_store.hopsworks.feature_view import (
    TRAINING_DATASET_TAG,
    HopsworksFeatureView,
    split_arguments,
)
from feature_store.hopsworks.project import HopsworksProject
from fstrain.kernel.errors import IntegrityError, InvalidArgumentError, NotFoundError
from model_registry.hopsworks.registry import HopsworksModelRegistry


class Feature:
    def __init__(self, name: str, fg_id: int, type: str = "bigint") -> None:
        self.name, self.feature_group_id, self.type = name, fg_id, type


class FakeFG:
    def __init__(self, name: str, fg_id: int, columns: list[str], commits: dict | None = None):
        self.name, self.version, self.id = name, 1, fg_id
        self.primary_key, self.event_time, self.description = [columns[0]], None, ""
        self.features = [Feature(c, fg_id) for c in columns]
        self.tags: dict[str, Any] = {}
        self.commits = commits or {}

    def commit_details(self, wallclock_time: Any = None, limit: int | None = None) -> dict:
        keys = sorted(self.commits, key=int, reverse=True)[:limit]
        return {k: self.commits[k] for k in keys}

    def add_tag(self, name: str, value: Any) -> None:
        self.tags[name] = value

    def get_tag(self, name: str) -> Any:
        return self.tags.get(name)

    def get_tags(self) -> dict:
        return dict(self.tags)

    def select(self, features: list[Any]) -> FakeQuery:
        names = [getattr(f, "name", f) for f in features]  # the adapter passes Feature objects
        return FakeQuery([self], [f for f in self.features if f.name in names])


class FakeQuery:
    def __init__(self, groups: list[FakeFG], features: list[Feature]) -> None:
        self.featuregroups, self.features = groups, features

    def join(self, sub_query: FakeQuery, on=None, left_on=None, right_on=None,
             join_type="left", prefix=None) -> FakeQuery:
        self.featuregroups += sub_query.featuregroups
        self.features += sub_query.features
        return self


class FakeFS:
    def __init__(self) -> None:
        self.created: list[tuple] = []

    def get_or_create_feature_view(self, name: str, query: Any, version: int, **kwargs: Any):
        self.created.append((name, query, version, kwargs))
        return FakeFV(name, version, query, kwargs)

    def get_feature_group(self, name: str, version: int | None = None) -> None:
        return None


class Split:
    def __init__(self, name: str) -> None:
        self.name, self.percentage, self.start_time, self.end_time = name, 0.2, None, None


class TD:
    def __init__(self, version: int, seed: int) -> None:
        self.version, self.seed = version, seed
        self.splits = [Split("test"), Split("train"), Split("validation")]
        self.data_format, self.description, self.location = "parquet", "", "hopsfs://td"
        self.event_start_time, self.event_end_time = 1704067200000, None
        self.training_dataset_type, self.extra_filter = "HOPSFS_TRAINING_DATASET", None


class FakeFV:
    def __init__(self, name: str, version: int, query: FakeQuery, kwargs: dict) -> None:
        self.name, self.version, self.query = name, version, query
        self.labels = kwargs.get("labels", [])
        self.training_helper_columns = kwargs.get("training_helper_columns", [])
        self.inference_helper_columns, self.description = [], ""
        self.transformation_functions = list(kwargs.get("transformation_functions") or [])
        self.features = query.features
        self.tags = {t["name"]: t["value"] for t in kwargs.get("tags") or []}  # SDK Tag entries
        self.td_tags: dict[int, dict] = {}
        self.tds: dict[int, TD] = {}
        self.frames: tuple = ()

    def create_train_validation_test_split(self, **kwargs: Any) -> tuple[int, None]:
        version = len(self.tds) + 1
        self.tds[version] = TD(version, kwargs["seed"])
        self.last_create = kwargs
        return version, None

    def add_training_dataset_tag(self, training_dataset_version: int, name: str, value: Any):
        self.td_tags.setdefault(training_dataset_version, {})[name] = json.loads(json.dumps(value))

    def get_training_dataset_tags(self, training_dataset_version: int) -> dict:
        return dict(self.td_tags.get(training_dataset_version, {}))

    def get_tags(self) -> dict:
        return dict(self.tags)

    def get_training_datasets(self) -> list[TD]:
        return list(self.tds.values())

    def get_train_validation_test_split(self, training_dataset_version: int, read_options=None,
                                        primary_key=False, event_time=False,
                                        training_helper_columns=False, dataframe_type="default"):
        return tuple(f.copy() for f in self.frames)


def _setup() -> tuple[HopsworksFeatureStore, FakeFS, FakeFG, FakeFG]:
    sdk_fs = FakeFS()
    fs = HopsworksFeatureStore(sdk_fs)
    tx = FakeFG("transactions", 1, ["t_id", "amount"], {"7": {"committedOn": "a"}, "12": {}})
    labels = FakeFG("cc_fraud", 2, ["t_id", "is_fraud"], {"3": {}})
    return fs, sdk_fs, tx, labels


def _query(tx: FakeFG, labels: FakeFG) -> HopsworksQuery:
    q = HopsworksFeatureGroup(tx, None).select(["t_id", "amount"])
    return q.join(HopsworksFeatureGroup(labels, None).select(["is_fraud"]))


def test_split_arguments_map_random_time_gap_stratified_and_refuse_group():
    kwargs, spec = split_arguments("fv", three_way=True, split=None, seed=5,
                                   sizes={"validation_size": 0.1, "test_size": 0.2},
                                   bounds={}, gap=None, group_column=None, stratify_column=None)
    assert kwargs == {"seed": 5, "validation_size": 0.1, "test_size": 0.2}
    bounds = {"train_start": "2024-01-01", "train_end": "2024-02-01",
              "validation_start": "2024-02-01", "validation_end": "2024-03-01",
              "test_start": "2024-03-05", "test_end": "2024-04-01"}
    kwargs, spec = split_arguments("fv", three_way=True, split="time", seed=5, sizes={},
                                   bounds=bounds, gap="2D", group_column=None,
                                   stratify_column=None)
    # UTC Timestamps, which the SDK turns into epoch ms (it refuses ISO strings with a "T")
    assert kwargs["validation_start"] == pd.Timestamp("2024-02-03", tz="UTC")
    assert kwargs["test_start"] == pd.Timestamp("2024-03-05", tz="UTC")  # already later
    assert all(isinstance(v, pd.Timestamp) for k, v in kwargs.items() if k != "seed")
    assert spec["gap"] == "P2DT0H0M0S"
    with pytest.warns(UserWarning, match="no stratified split"):
        kwargs, spec = split_arguments("fv", three_way=True, split="stratified", seed=5,
                                       sizes={"validation_size": 0.1, "test_size": 0.2},
                                       bounds={}, gap=None, group_column=None,
                                       stratify_column=None)
    assert spec["requested"] == "stratified" and kwargs["seed"] == 5
    with pytest.raises(InvalidArgumentError, match="group"):
        split_arguments("fv", three_way=True, split="group", seed=5, sizes={}, bounds={},
                        gap=None, group_column="card", stratify_column=None)
    with pytest.raises(InvalidArgumentError, match="needs bounds"):
        split_arguments("fv", three_way=True, split="time", seed=5, sizes={"test_size": 0.2},
                        bounds={}, gap=None, group_column=None, stratify_column=None)


def _view_with_version() -> tuple[HopsworksFeatureView, FakeFV, int]:
    fs, _, tx, labels = _setup()
    fv = fs.get_or_create_feature_view("v", 1, _query(tx, labels), labels=["is_fraud"],
                                       label_fill_values={"is_fraud": 0})
    version, _ = fv.create_train_validation_test_split(validation_size=0.2, test_size=0.2, seed=9)
    return fv, fv._sdk, version


def test_create_records_commits_seed_and_reads_fill_labels_and_hashes():
    fv, sdk, version = _view_with_version()
    assert sdk.last_create["write_options"] == {"wait_for_job": True}
    record = sdk.td_tags[version][TRAINING_DATASET_TAG]
    assert record["feature_group_commits"] == {"transactions:1": 12, "cc_fraud:1": 3}
    assert record["seed"] == 9 and record["sha256"] == {}
    x = pd.DataFrame({"amount": [1.0, 2.0]})
    y = pd.DataFrame({"is_fraud": [1.0, None]})
    sdk.frames = (x, x, x, y, y, y)
    *_, y_tr, _, _ = fv.get_train_validation_test_split(version)
    assert y_tr["is_fraud"].tolist() == [1.0, 0.0]
    hashes = sdk.td_tags[version][TRAINING_DATASET_TAG]["sha256"]
    assert sorted(k.split("|")[0] for k in hashes) == ["test", "train", "validation"]
    sdk.frames = (x.assign(amount=[1.0, 3.0]), x, x, y, y, y)  # the server re-ran the query
    fv.get_train_validation_test_split(version)  # plain reads still work
    with pytest.raises(IntegrityError, match=r"split\(s\) \['train'\] no longer match"):
        fv.get_train_validation_test_split(version, read_options={"verify": True})


def test_training_dataset_metadata_has_the_local_fields():
    from feature_store.api import TrainingDataset

    fv, sdk, version = _view_with_version()
    sdk.frames = tuple([pd.DataFrame({"amount": [1.0]})] * 3 + [pd.DataFrame({"is_fraud": [1]})] * 3)
    fv.get_train_validation_test_split(version)
    td = fv.get_training_dataset(version)
    assert isinstance(td, TrainingDataset)
    assert td.seed == 9 and list(td.splits) == ["train", "validation", "test"]
    assert td.feature_group_commits == {"transactions:1": 12, "cc_fraud:1": 3}
    assert td.splits["train"]["sha256"] and td.type == "MATERIALIZED"
    assert td.event_start_time == "2024-01-01T00:00:00+00:00"
    assert td.split_spec["strategy"] == "random"
    with pytest.raises(NotFoundError, match="no training dataset version 99"):
        fv.get_training_dataset(99)


def test_missing_feature_group_is_not_found():
    fs, *_ = _setup()
    with pytest.raises(NotFoundError, match="'orders' v1 does not exist"):
        fs.get_feature_group("orders", 1)


# -- model registry ----------------------------------------------------------------------------


class FakeModel:
    def __init__(self, store: dict, name: str, version: int | None, **kwargs: Any) -> None:
        self.store, self.name, self.version, self.kwargs = store, name, version, kwargs
        self.training_metrics = kwargs.get("metrics") or {}
        self.description, self.framework, self.created = kwargs.get("description"), "PYTHON", None
        self.training_dataset_version = kwargs.get("training_dataset_version")
        self.model_files_path = f"/Projects/p/Models/{name}/{version}/Files"
        self.tags: dict[str, Any] = {}

    def save(self, model_path: str, await_registration: int = 480,
             keep_original_files: bool = False) -> FakeModel:
        self.version = max((k for k in self.store if isinstance(k, int)), default=0) + 1
        self.model_files_path = f"/Projects/p/Models/{self.name}/{self.version}/Files"
        self.files = {p.relative_to(model_path).as_posix(): p.read_bytes()
                      for p in Path(model_path).rglob("*") if p.is_file()}
        self.store[self.version] = self
        return self

    def download(self, local_path: str | None = None) -> str:
        if local_path is None:  # as hsml: a cache keyed by the model, reused once complete
            dest = self.store["cache"] / self.name / str(self.version)
            if (dest / ".download_complete").is_file():
                return str(dest)
        else:
            dest = Path(local_path)
        for rel, data in self.files.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
        if local_path is None:
            (dest / ".download_complete").write_text("done")
        return str(dest)

    def add_tag(self, name: str, value: Any) -> None:
        self.tags[name] = value

    def get_tags(self) -> dict:
        return dict(self.tags)


class FakeFlavor:
    def __init__(self, store: dict) -> None:
        self.store = store

    def create_model(self, name: str, **kwargs: Any) -> FakeModel:
        return FakeModel(self.store, name, kwargs.pop("version"), **kwargs)


class FakeMR:
    def __init__(self, cache: Path | None = None) -> None:
        self.store: dict[Any, Any] = {"cache": cache}
        self.python = self.sklearn = self.torch = FakeFlavor(self.store)

    def get_model(self, name: str, version: int | None = None) -> FakeModel | None:
        return self.store.get(version)


class FakeDatasets:
    """Files of ``/Projects/p/Models/<name>/<version>/Files``; ``upload``/``move`` with
    ``overwrite=True`` remove the existing file first, as the SDK's DatasetApi does."""

    def __init__(self, mr: FakeMR) -> None:
        self.mr, self.uploads = mr, []
        self.fail_uploads = False

    @staticmethod
    def _split(path: str) -> tuple[int, str]:
        parts = path.split("/")
        return int(parts[5]), "/".join(parts[7:])

    def exists(self, path: str) -> bool:
        return not path.startswith("Resources/")  # the project's trust list: none here

    def upload(self, local_path: str, upload_path: str, overwrite: bool = False) -> str:
        self.uploads.append((Path(local_path).name, upload_path))
        version, folder = self._split(upload_path)
        rel = "/".join([*([folder] if folder else []), Path(local_path).name])
        files = self.mr.store[version].files
        if rel in files and not overwrite:
            raise RuntimeError(f"{rel} exists")
        files.pop(rel, None)
        if self.fail_uploads:
            raise ConnectionError("upload interrupted")
        files[rel] = Path(local_path).read_bytes()
        return upload_path

    def move(self, source_path: str, destination_path: str, overwrite: bool = False) -> None:
        version, source = self._split(source_path)
        _, destination = self._split(destination_path)
        files = self.mr.store[version].files
        if destination in files and not overwrite:
            raise RuntimeError(f"{destination} exists")
        files[destination] = files.pop(source)


class FakeProject:
    name = "p"

    def __init__(self, cache: Path | None = None) -> None:
        self.mr = FakeMR(cache)
        self.datasets = FakeDatasets(self.mr)

    def get_model_registry(self) -> FakeMR:
        return self.mr

    def get_dataset_api(self) -> FakeDatasets:
        return self.datasets


def test_registry_save_hashes_status_attachments_and_tamper_detection(tmp_path):
    project = HopsworksProject(FakeProject(), root=tmp_path / "cache")
    project.bind_model_registry(HopsworksModelRegistry)
    mr = project.get_model_registry()
    src = tmp_path / "model"
    src.mkdir()
    (src / "model.json").write_text('{"w": 1}')
    model = mr.python.create_model("m", metrics={"auc": 0.8}, input_example={"a": 1.0},
                                   hyperparameters={"depth": 3})
    model.save(str(src))
    sdk = project.sdk.mr.store[1]
    assert model.version == 1 and model.validation_status == "pending"
    assert isinstance(sdk.kwargs["input_example"], pd.DataFrame)
    manifest = json.loads(sdk.files["manifest.json"])
    assert [e["path"] for e in manifest["files"]] == ["history/0000/record.json", "model.json"]
    assert sdk.tags["fstrain_manifest_sha256"] and sdk.tags["validation_status"] == "pending"
    model.set_validation_status("passed")
    got = mr.get_model("m", 1)
    assert got.validation_status == "passed" and got.hyperparameters == {"depth": 3}
    got.write_attachment("scorecard.json", {"roc_auc": 0.9})
    got.add_attachment("images/roc.png", b"png")
    assert "images/roc.png" in sdk.files and ".part" not in "".join(sdk.files)
    fresh = Path(mr.get_model("m", 1).download(str(tmp_path / "dl")))
    original = sdk.files["model.json"]
    assert json.loads((fresh / "scorecard.json").read_text()) == {"roc_auc": 0.9}
    sdk.files["model.json"] = b'{"w": 2}'  # changed on the server
    with pytest.raises(IntegrityError, match="model.json"):
        mr.get_model("m", 1).download(str(tmp_path / "dl2"))
    sdk.files["model.json"] = original
    sdk.files["backdoor.py"] = b"import os"  # a file the manifest does not list
    with pytest.raises(IntegrityError, match="extra file.*backdoor.py"):
        mr.get_model("m", 1).download(str(tmp_path / "dl3"))
    del sdk.files["backdoor.py"]
    sdk.files["input_example.json"] = b"[1]"  # hsml writes this one itself: not an extra file
    assert Path(mr.get_model("m", 1).download(str(tmp_path / "dl4"))).is_dir()
    with pytest.raises(NotFoundError, match="does not exist"):
        mr.get_model("m", 7)


def _registry(sdk_project: FakeProject, root: Path) -> Any:
    project = HopsworksProject(sdk_project, root=root)
    project.bind_model_registry(HopsworksModelRegistry)
    return project.get_model_registry()


def _saved_model(tmp_path: Path, sdk_project: FakeProject) -> Any:
    src = tmp_path / "model"
    src.mkdir(exist_ok=True)
    (src / "model.json").write_text('{"w": 1}')
    mr = _registry(sdk_project, tmp_path / "client")
    return mr.python.create_model("m").save(str(src))


def test_download_after_an_attachment_is_not_the_stale_sdk_cache(tmp_path):
    """hsml's ``download()`` without a path reuses its cache of the model id; after an
    attachment is added that copy is stale, so the adapter never downloads through it."""
    sdk_project = FakeProject(cache=tmp_path / "hsml-cache")
    model = _saved_model(tmp_path, sdk_project)
    first = Path(model.download())
    assert sorted(p.name for p in first.iterdir()) == ["history", "manifest.json", "model.json"]
    model.write_attachment("scorecard.json", {"roc_auc": 0.9})
    again = Path(_registry(sdk_project, tmp_path / "client").get_model("m", 1).download())
    assert json.loads((again / "scorecard.json").read_text()) == {"roc_auc": 0.9}
    assert again != first and again.is_relative_to(tmp_path / "client" / "downloads")


def test_a_mirror_older_than_the_registry_manifest_is_downloaded_again(tmp_path):
    """Two processes: the second one's local mirror predates the first one's attachment."""
    sdk_project = FakeProject()
    writer = _saved_model(tmp_path, sdk_project)
    reader = _registry(sdk_project, tmp_path / "other").get_model("m", 1)
    assert not (reader.model_path / "scorecard.json").exists()
    writer.write_attachment("scorecard.json", {"roc_auc": 0.9})
    again = _registry(sdk_project, tmp_path / "other").get_model("m", 1)
    assert [e["path"] for e in again.manifest["files"]] == [
        "history/0000/record.json", "model.json", "scorecard.json"]
    assert json.loads((again.model_path / "scorecard.json").read_text()) == {"roc_auc": 0.9}


def test_overwriting_an_attachment_uploads_before_replacing(tmp_path):
    """A failed upload of a new scorecard leaves the old one in the version, intact."""
    sdk_project = FakeProject()
    model = _saved_model(tmp_path, sdk_project)
    model.write_attachment("scorecard.json", {"roc_auc": 0.9})
    files = sdk_project.mr.store[1].files
    old = files["scorecard.json"]
    sdk_project.datasets.fail_uploads = True
    with pytest.raises(Exception, match="upload interrupted"):
        model.write_attachment("scorecard.json", {"roc_auc": 0.5})
    assert files["scorecard.json"] == old
    sdk_project.datasets.fail_uploads = False
    model.write_attachment("scorecard.json", {"roc_auc": 0.7})
    assert json.loads(files["scorecard.json"]) == {"roc_auc": 0.7}
    assert not [f for f in files if f.endswith(".part")]
    fresh = _registry(sdk_project, tmp_path / "third").get_model("m", 1)
    assert json.loads((fresh.model_path / "scorecard.json").read_text()) == {"roc_auc": 0.7}


def test_model_get_feature_view_returns_the_adapter_view_initialised_for_batch_scoring(tmp_path):
    fs, sdk_fs, tx, labels = _setup()
    fv = fs.get_or_create_feature_view("fraud", 1, _query(tx, labels), labels=["is_fraud"])
    fv._sdk.tds[3] = TD(3, seed=0)
    sdk_fv = sdk_fs.created[0]
    scored: list[Any] = []

    class ServingFV(FakeFV):
        def init_batch_scoring(self, training_dataset_version: int | None = None,
                               n_processes: int | None = None) -> None:
            scored.append(training_dataset_version)

    serving = ServingFV("fraud", 1, sdk_fv[1], sdk_fv[3])
    sdk_fs.get_feature_view = lambda name, version=None: serving if name == "fraud" else None

    class ProjectWithStore(FakeProject):
        def get_feature_store(self, name: str | None = None) -> FakeFS:
            return sdk_fs

    project = HopsworksProject(ProjectWithStore(), root=tmp_path / "cache")
    project.bind_model_registry(HopsworksModelRegistry)
    src = tmp_path / "model"
    src.mkdir()
    (src / "model.json").write_text("{}")
    model = project.get_model_registry().python.create_model(
        "m", feature_view=fv, training_dataset_version=3)
    model.save(str(src))
    got = project.get_model_registry().get_model("m", 1)
    view = got.get_feature_view()
    assert isinstance(view, HopsworksFeatureView) and view.name == "fraud"
    assert scored == [3]
    got.get_feature_view(init=False)
    assert scored == [3]
    with pytest.raises(InvalidArgumentError, match="online=True"):
        got.get_feature_view(online=True)


def test_validation_history_is_appended_through_attachments(tmp_path):
    """The Hopsworks registry keeps the same append-only history as the local one."""
    sdk_project = FakeProject()
    model = _saved_model(tmp_path, sdk_project)
    failing = ["roc_auc >= 0.9 (value 0.8, required >= 0.9)"]
    first = model.record_validation("failed", {"failing_gates": failing},
                                    {"scorecard.json": b'{"run": 1}'})
    second = model.record_validation("passed", {"failing_gates": []},
                                     {"scorecard.json": b'{"run": 2}'})
    files = sdk_project.mr.store[1].files
    assert files["history/0001/scorecard.json"] == b'{"run": 1}'  # never overwritten
    assert files["history/0002/scorecard.json"] == b'{"run": 2}'
    with pytest.raises(InvalidArgumentError, match="append-only"):
        model.write_attachment("history/0001/scorecard.json", {"run": 3})
    model.sign_off("approval", reviewer="bob", note="ok")
    reader = _registry(sdk_project, tmp_path / "reader").get_model("m", 1)
    assert [e["kind"] for e in reader.history()] == ["creation", "validation", "validation",
                                                     "approval"]
    assert reader.verify_history().state == "unsigned"  # chained, hashed, no trust list
    assert (first["seq"], second["seq"]) == (1, 2) and reader.validation_status == "passed"
    assert reader.approval_status == "approved"
    assert reader.read_history_file(1, "scorecard.json") == b'{"run": 1}'


def test_latest_skips_a_training_dataset_whose_creation_never_completed():
    """A version whose materialization job failed exists in Hopsworks' metadata but never got
    fstrain's record tag: it reads as ``incomplete`` and ``latest`` passes over it."""
    from fstrain.kernel.versions import resolve_training_dataset_version

    fv, sdk, version = _view_with_version()
    sdk.tds[version + 1] = TD(version + 1, seed=3)  # the SDK raised: no tag was written
    assert fv.get_training_dataset(version).state == "ok"
    assert fv.get_training_dataset(version + 1).state == "incomplete"
    assert resolve_training_dataset_version(fv, "latest") == version
    assert resolve_training_dataset_version(fv, version + 1) == version + 1  # asked by number
    del sdk.td_tags[version]
    with pytest.raises(NotFoundError, match=r"no completed training dataset \(versions \[1, 2\]"):
        resolve_training_dataset_version(fv, "latest")


def test_an_as_known_join_is_refused_by_name_on_hopsworks():
    """fstrain's as-known join cannot run on the cluster: refused, never ignored, before any
    SDK call (the SDK objects here would fail on any)."""
    with pytest.raises(InvalidArgumentError, match=r"query: join\(as_known=True\) is an fstrain "
                                                   r"extension.*refused rather than ignored"):
        HopsworksQuery(object()).join(HopsworksQuery(object()), as_known=True)


def test_a_view_as_known_and_an_ingestion_time_are_refused_by_name_on_hopsworks():
    """The view-level as_known and a group's ingestion_time are fstrain extensions the cluster
    cannot honour: refused before any SDK call (the SDK object here fails on any)."""
    fs = HopsworksFeatureStore(object())
    query = HopsworksQuery(object())
    for create in (fs.create_feature_view, fs.get_or_create_feature_view):
        args = ("v", query) if create == fs.create_feature_view else ("v", 1, query)
        with pytest.raises(InvalidArgumentError, match=r"feature view 'v'.*as_known=True is an "
                                                       r"fstrain extension.*refused rather"):
            create(*args, as_known=True)
    with pytest.raises(InvalidArgumentError, match=r"feature group 'g': ingestion_time='at' is "
                                                   r"an fstrain extension.*refused rather"):
        fs.get_or_create_feature_group("g", 1, primary_key=["k"], event_time="ts",
                                       ingestion_time="at")
