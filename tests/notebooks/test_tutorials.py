"""Notebook conformance: real Hopsworks tutorials run cell by cell on the embedded store.

The notebooks in ``tests/notebooks/<tutorial>/`` are vendored unmodified (see the README there
for source, commit and licence). The runner executes their code cells in order, each tutorial's
notebooks sharing one embedded store, with exactly these changes, each listed in ``EDITS`` with
its reason:

* the **login line**: ``project = hopsworks.login()`` becomes
  ``import fstrain; project = fstrain.login()`` (the store root is ``$FSTRAIN_HOME``);
* the **data source**: cells that download the tutorial's CSV files read synthetic frames with
  the same columns and types instead (small, seeded, generated below);
* IPython shell lines (``!pip install ...``) are not Python and are skipped;
* cells documented as cluster-only (deployments, dataset uploads) are skipped, or, where a
  model deployment serves the notebook's own predictor script, replaced by that script running
  in-process (:class:`InProcessDeployment`).

Any other cell that raises fails the test, naming the notebook and the cell.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent
LOGIN_LINE = "project = hopsworks.login()"
LOCAL_LOGIN = "import fstrain; project = fstrain.login()"


@dataclass(frozen=True)
class Edit:
    """A documented change to one cell: new source, or ``None`` to skip the cell."""

    source: str | None
    reason: str


# -- the runner ---------------------------------------------------------------------------------


def code_cells(notebook: Path) -> list[tuple[int, str]]:
    """``(cell index, source)`` of every code cell, in order."""
    cells = json.loads(notebook.read_text())["cells"]
    return [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "code"]


def _python_only(source: str) -> str:
    """Drop IPython shell and magic lines (``!pip install ...``, ``%matplotlib``)."""
    return "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith(("!", "%")))


def run_notebook(notebook: Path, namespace: dict, edits: dict[int, Edit]) -> list[int]:
    """Run ``notebook``'s code cells in ``namespace``; return the indices of the cells run.

    Raises:
        AssertionError: a cell raised (message: notebook, cell index, source, traceback), or an
            edit names a cell that is not a code cell, or a login cell lacks the login line.
    """
    cells = code_cells(notebook)
    unknown = sorted(set(edits) - {i for i, _ in cells})
    assert not unknown, f"{notebook.name}: edits name cells {unknown}, which are not code cells"
    ran = []
    for index, source in cells:
        edit = edits.get(index)
        if edit is not None:
            if edit.source is None:
                continue
            source = edit.source
        if "hopsworks.login(" in source:
            assert LOGIN_LINE in source, f"{notebook.name} cell {index}: unexpected login line"
            source = source.replace(LOGIN_LINE, LOCAL_LOGIN)
        source = _python_only(source)
        try:
            exec(compile(source, f"{notebook.name}[cell {index}]", "exec"), namespace)  # noqa: S102
        except Exception:  # noqa: BLE001 - any failure of a cell fails the suite, with its cell
            pytest.fail(f"{notebook.name} cell {index} failed:\n{source}\n\n{traceback.format_exc()}")
        ran.append(index)
    return ran


@pytest.fixture
def notebook_env(tmp_path, monkeypatch):
    """A fresh store ($FSTRAIN_HOME), a scratch working directory and a headless matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.setenv("FSTRAIN_HOME", str(tmp_path / "store"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


# -- fraud_batch: synthetic sources with the tutorial's columns and types ----------------------


def fraud_batch_sources(seed: int = 7, n_cards: int = 40, n_transactions: int = 1200) -> dict:
    """credit_cards.csv, profiles.csv and transactions.csv of the fraud tutorial, synthetic.

    Same columns and dtypes as ``pd.read_csv`` gives on the originals (``parse_dates`` columns
    as naive ``datetime64[ns]``); frauds are about 10% so both classes reach every split.
    """
    rng = np.random.default_rng(seed)
    cc_num = rng.choice(np.arange(4_000_000_000_000_000, 4_000_000_000_100_000), n_cards,
                        replace=False).astype("int64")
    credit_cards = pd.DataFrame({
        "cc_num": cc_num,
        "provider": rng.choice(["visa", "mastercard"], n_cards),
        "expires": [f"{m:02d}/{y:02d}" for m, y in zip(rng.integers(1, 13, n_cards),
                                                      rng.integers(25, 30, n_cards), strict=True)],
    })
    profiles = pd.DataFrame({
        "name": [f"person {i}" for i in range(n_cards)],
        "sex": rng.choice(["F", "M"], n_cards),
        "mail": [f"p{i}@example.com" for i in range(n_cards)],
        "birthdate": pd.to_datetime("1950-01-01")
        + pd.to_timedelta(rng.integers(0, 50 * 365, n_cards), unit="D"),
        "City": rng.choice(["Stockholm", "Oslo"], n_cards),
        "Country": rng.choice(["SE", "NO"], n_cards),
        "cc_num": cc_num,
    })
    seconds = np.sort(rng.choice(60 * 24 * 3600, n_transactions, replace=False))
    transactions = pd.DataFrame({
        "tid": [f"{x:032x}" for x in rng.integers(0, 2**62, n_transactions)],
        "datetime": pd.to_datetime("2022-01-01") + pd.to_timedelta(seconds, unit="s"),
        "cc_num": rng.choice(cc_num, n_transactions),
        "category": rng.choice(["Grocery", "Restaurant/Cafeteria", "Health/Beauty",
                                "Domestic Transport", "Clothing"], n_transactions),
        "amount": np.round(rng.gamma(2.0, 40.0, n_transactions), 2),
        "latitude": rng.uniform(55.0, 60.0, n_transactions),
        "longitude": rng.uniform(10.0, 18.0, n_transactions),
        "city": rng.choice(["Stockholm", "Oslo", "Malmo"], n_transactions),
        "country": rng.choice(["SE", "NO"], n_transactions),
        "fraud_label": (rng.random(n_transactions) < 0.1).astype("int64"),
    })
    return {"credit_cards": credit_cards, "profiles": profiles, "transactions": transactions}


_DATA = "data source: the tutorial downloads this CSV; the test reads synthetic data of its columns"

FRAUD_BATCH_EDITS: dict[str, dict[int, Edit]] = {
    "1_fraud_batch_feature_pipeline.ipynb": {
        5: Edit("credit_cards_df = SOURCES['credit_cards'].copy()", _DATA),
        6: Edit("profiles_df = SOURCES['profiles'].copy()", _DATA),
        7: Edit("trans_df = SOURCES['transactions'].copy()", _DATA),
        19: Edit(
            "import great_expectations as ge\n"
            "from great_expectations.core import ExpectationSuite\n"
            "ge.get_context(mode='ephemeral')  # GX 1.x adds expectations inside a context\n"
            "from great_expectations.expectations.expectation_configuration import (\n"
            "    ExpectationConfiguration as _Configuration)\n"
            "def ExpectationConfiguration(expectation_type, kwargs):\n"
            "    return _Configuration(type=expectation_type, kwargs=kwargs).to_domain_obj()\n"
            "expectation_suite_transactions = ExpectationSuite(name='transactions_suite')\n",
            "Great Expectations API: the cell uses GX 0.x (ge.from_pandas, "
            "ExpectationConfiguration(expectation_type=...)), gone in GX 1.x, which "
            "hopsworks[great-expectations] also allows and fstrain pins; this is the same empty "
            "suite in GX 1.x, so cell 20 adds its expectations unchanged",
        ),
    },
    "2_fraud_batch_training_pipeline.ipynb": {},
    "3_fraud_batch_inference.ipynb": {},
}


def test_fraud_batch_tutorial_runs_on_the_embedded_store(notebook_env, monkeypatch):
    folder = HERE / "fraud_batch"
    monkeypatch.syspath_prepend(str(folder))  # the tutorial's own `features` package
    sources = fraud_batch_sources()
    namespaces = []
    try:
        for name, edits in FRAUD_BATCH_EDITS.items():
            namespace = {"__name__": "__main__", "SOURCES": sources}
            ran = run_notebook(folder / name, namespace, edits)
            assert ran, name
            namespaces.append(namespace)
    finally:  # the tutorial's `features` package must not shadow anything in later tests
        for module in [m for m in sys.modules if m == "features" or m.startswith("features.")]:
            del sys.modules[module]
    feature, training, inference = namespaces
    # feature pipeline: epoch-millisecond event times and a GX suite on the group
    assert feature["trans_fg"].get_feature("datetime").type == "int64"
    assert feature["trans_fg"].get_latest_validation_report().success
    # training pipeline: join keys by the SDK's rule (no on=: the primary keys both share)
    joins = training["feature_view"].query.joins
    assert [(j.left_on, j.right_on) for j in joins] == [(["cc_num"], ["cc_num"])]
    # the built-in label_encoder, the joined group's event time, lineage
    assert "label_encoder_category_" in training["X_train"].columns
    assert training["fraud_model"].training_dataset_version == 1
    # inference: batch data transformed with version 1's statistics, logged and read back
    batch = inference["batch_data"]
    assert list(batch.columns) == list(training["X_train"].columns)
    assert len(inference["predictions"]) == len(batch)
    log = inference["feature_view"].read_log()
    assert len(log) == min(1000, len(batch))
    assert log["predicted_fraud_label"].tolist() == inference["predictions"][:1000].tolist()
    assert set(log["model_name"]) == {"xgboost_fraud_batch_model"}
    transformed_log = inference["feature_view"].read_log(transformed=True)
    assert "label_encoder_category_" in transformed_log.columns


# -- churn: synthetic sources with the tutorial's columns and types -----------------------------


def churn_sources(seed: int = 11, n: int = 400) -> dict:
    """demography.csv, customer_info.csv and subscriptions.csv of the churn tutorial, synthetic.

    As ``pd.read_csv`` reads the originals: Yes/No strings, ``TotalCharges`` as strings with
    blanks for new customers (the notebook coerces them), ``Churn`` as Yes/No, ``datetime``
    parsed to naive ``datetime64[ns]``.
    """
    rng = np.random.default_rng(seed)
    ids = [f"{i:04d}-{chr(65 + i % 26)}{chr(65 + i // 26 % 26)}XYZ" for i in range(n)]
    yes_no = ["Yes", "No"]
    when = pd.to_datetime("2023-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
    tenure = rng.integers(0, 72, n)
    monthly = np.round(rng.uniform(18.0, 120.0, n), 2)
    total = [" " if t == 0 else f"{t * m:.2f}" for t, m in zip(tenure, monthly, strict=True)]
    demography = pd.DataFrame({
        "customerID": ids, "gender": rng.choice(["Female", "Male"], n),
        "SeniorCitizen": rng.integers(0, 2, n), "Partner": rng.choice(yes_no, n),
        "Dependents": rng.choice(yes_no, n),
    })
    customer_info = pd.DataFrame({
        "customerID": ids,
        "Contract": rng.choice(["Month-to-month", "One year", "Two year"], n),
        "tenure": tenure, "PaymentMethod": rng.choice(["Electronic check", "Mailed check",
                                                       "Credit card (automatic)"], n),
        "PaperlessBilling": rng.choice(yes_no, n), "MonthlyCharges": monthly,
        "TotalCharges": total, "Churn": rng.choice(yes_no, n, p=[0.3, 0.7]), "datetime": when,
    })
    services = ["DeviceProtection", "OnlineBackup", "OnlineSecurity", "InternetService",
                "MultipleLines", "PhoneService", "TechSupport", "StreamingMovies", "StreamingTV"]
    choices = {"InternetService": ["DSL", "Fiber optic", "No"],
               "MultipleLines": ["Yes", "No", "No phone service"], "PhoneService": yes_no}
    subscriptions = pd.DataFrame({"customerID": ids, **{
        s: rng.choice(choices.get(s, ["Yes", "No", "No internet service"]), n) for s in services
    }, "datetime": when})
    return {"demography": demography, "customer_info": customer_info,
            "subscriptions": subscriptions}


CHURN_EDITS: dict[str, dict[int, Edit]] = {
    "1_churn_feature_pipeline.ipynb": {
        6: Edit("demography_df = SOURCES['demography'].copy()\n"
                "customer_info_df = SOURCES['customer_info'].copy()\n"
                "subscriptions_df = SOURCES['subscriptions'].copy()", _DATA),
    },
    "2_churn_training_pipeline.ipynb": {},
    "3_churn_batch_inference.ipynb": {},
}


def test_churn_tutorial_runs_on_the_embedded_store(notebook_env):
    folder = HERE / "churn"
    sources = churn_sources()
    namespaces = []
    for name, edits in CHURN_EDITS.items():
        namespace = {"__name__": "__main__", "SOURCES": sources}
        assert run_notebook(folder / name, namespace, edits), name
        namespaces.append(namespace)
    _, training, inference = namespaces
    # joins without on=: the primary key both groups share
    joins = training["feature_view"].query.joins
    assert [(j.left_on, j.right_on) for j in joins] == [(["customerid"], ["customerid"])] * 2
    # three-way split, 18 built-in transformations, lineage to the version trained on
    assert training["model"].training_dataset_version == 1
    assert "min_max_scaler_tenure_" in training["X_train"].columns
    # inference inverted the transformations through the SDK's objects
    df_all = inference["df_all"]
    raw = inference["feature_view"].get_batch_data(transformed=False)
    assert df_all["internetservice"].tolist() == raw["internetservice"].tolist()
    np.testing.assert_allclose(df_all["tenure"], raw["tenure"])
    assert inference["customer_info_fg"].statistics_config["correlations"] is True


# -- fraud_online: online-enabled groups, feature vectors and a predictor served in-process ---


def fraud_online_sources(seed: int = 5, n_cards: int = 30, n_transactions: int = 900) -> dict:
    """profiles.csv and transactions.csv of the online fraud tutorial, synthetic: the columns
    and types ``pd.read_csv`` gives on the originals, most transactions "Cash Withdrawal" (the
    notebook keeps only those), some without a country (it fills them), from January to March
    2022 (its time split)."""
    rng = np.random.default_rng(seed)
    cc_num = rng.choice(np.arange(4_100_000_000_000_000, 4_100_000_000_100_000), n_cards,
                        replace=False).astype("int64")
    profiles = pd.DataFrame({
        "name": [f"person {i}" for i in range(n_cards)], "sex": rng.choice(["F", "M"], n_cards),
        "mail": [f"p{i}@example.com" for i in range(n_cards)],
        "birthdate": pd.to_datetime("1960-01-01")
        + pd.to_timedelta(rng.integers(0, 40 * 365, n_cards), unit="D"),
        "City": rng.choice(["Stockholm", "Oslo"], n_cards),
        "Country": rng.choice(["SE", "NO"], n_cards), "cc_num": cc_num,
    })
    seconds = np.sort(rng.choice(89 * 24 * 3600, n_transactions, replace=False))
    country = rng.choice(["US", "SE", "NO"], n_transactions).astype(object)
    country[rng.random(n_transactions) < 0.05] = np.nan
    transactions = pd.DataFrame({
        "tid": [f"{x:032x}" for x in rng.integers(0, 2**62, n_transactions)],
        "datetime": pd.to_datetime("2022-01-01") + pd.to_timedelta(seconds, unit="s"),
        "cc_num": rng.choice(cc_num, n_transactions),
        "category": rng.choice(["Cash Withdrawal", "Grocery"], n_transactions, p=[0.9, 0.1]),
        "amount": np.round(rng.gamma(2.0, 40.0, n_transactions), 2),
        "latitude": rng.uniform(55.0, 60.0, n_transactions),
        "longitude": rng.uniform(10.0, 18.0, n_transactions),
        "city": rng.choice(["Stockholm", "Oslo"], n_transactions), "country": country,
        "fraud_label": (rng.random(n_transactions) < 0.15).astype("int64"),
    })
    return {"profiles": profiles, "transactions": transactions}


class InProcessDeployment:
    """Stands in for a model deployment: the notebook's own predictor script (its ``Predict``
    class, defined by the ``%%writefile`` cell) runs in this process, where a cluster would run
    it in a model server. ``predict(inputs=[x])`` hands it ``[[x]]``, as KServe does."""

    def __init__(self, name: str, predictor: type, model: object) -> None:
        self.name, self._predictor_class, self._model = name, predictor, model
        self._predictor: object | None = None

    def describe(self) -> None:
        print(f"in-process deployment {self.name}")

    def start(self, await_running: int | None = None) -> None:
        self._predictor = self._predictor_class(None, self._model)  # async_logger, model

    def predict(self, inputs: list) -> dict:
        assert self._predictor is not None, "start() the deployment first"
        return {"predictions": self._predictor.predict([inputs])}

    def stop(self, await_stopped: int | None = None) -> None:
        self._predictor = None


_SERVING = "model serving is cluster-only: the predictor script runs in-process instead"
_CLUSTER = "cluster-only (dataset upload, deployment state and logs, warm-up sleep)"

FRAUD_ONLINE_EDITS: dict[str, dict[int, Edit]] = {
    "1_fraud_online_feature_pipeline.ipynb": {
        6: Edit("profiles_df = SOURCES['profiles'].copy()\n"
                'profiles_df.columns = ["name", "gender", "mail", "birthdate", "City", '
                '"Country", "cc_num"]\n'
                'profiles_df = profiles_df[["cc_num", "gender"]]', _DATA),
        7: Edit("trans_df = SOURCES['transactions'].copy()", _DATA),
        15: Edit(FRAUD_BATCH_EDITS["1_fraud_batch_feature_pipeline.ipynb"][19].source,
                 "Great Expectations API: GX 0.x (ge.from_pandas), as in fraud_batch; the "
                 "same empty suite in GX 1.x, so cell 16 adds its expectations unchanged"),
        17: Edit("expectation_suite_profiles = ExpectationSuite(name='profiles_suite')",
                 "Great Expectations API: GX 0.x (ge.from_pandas); the same empty suite in GX "
                 "1.x, so cell 18 adds its expectations unchanged"),
    },
    "2_fraud_online_training_pipeline.ipynb": {
        17: Edit(
            'train_start = "2022/01/01"\ntrain_end = "2022/03/10"\n'
            'test_start = "2022/03/10"\ntest_end = "2022/03/31"\n'
            "X_train, X_test, y_train, y_test = feature_view.train_test_split(\n"
            "    train_start=train_start, train_end=train_end,\n"
            "    test_start=test_start, test_end=test_end,\n"
            "    primary_key=True, event_time=True,\n)",
            "the next cells sort by datetime and read cc_num from X_test; the pinned SDK "
            "returns the root's primary key and event time only with primary_key=True, "
            "event_time=True (both default False)"),
        44: Edit(None, _CLUSTER),
        46: Edit("deployment = InProcessDeployment('fraudonlinemodeldeployment', Predict, "
                 "fraud_model)\nDEPLOYMENTS[deployment.name] = deployment", _SERVING),
        48: Edit(None, _CLUSTER), 51: Edit(None, _CLUSTER), 52: Edit(None, _CLUSTER),
    },
    "3_fraud_online_inference_pipeline.ipynb": {
        9: Edit("deployment = DEPLOYMENTS['fraudonlinemodeldeployment']\n"
                "deployment.start(await_running=300)", _SERVING),
    },
}


def test_fraud_online_tutorial_serves_vectors_on_the_embedded_store(notebook_env, monkeypatch):
    folder = HERE / "fraud_online"
    monkeypatch.syspath_prepend(str(folder))  # the tutorial's own `features` package
    monkeypatch.setenv("MODEL_FILES_PATH", str(notebook_env / "fraud_online_model"))
    sources, deployments = fraud_online_sources(), {}
    namespaces = []
    try:
        for name, edits in FRAUD_ONLINE_EDITS.items():
            namespace = {"__name__": "__main__", "SOURCES": sources, "DEPLOYMENTS": deployments,
                         "InProcessDeployment": InProcessDeployment}
            assert run_notebook(folder / name, namespace, edits), name
            namespaces.append(namespace)
    finally:
        for module in [m for m in sys.modules if m == "features" or m.startswith("features.")]:
            del sys.modules[module]
    feature, training, inference = namespaces
    assert feature["trans_fg"].online_enabled and feature["profile_fg"].online_enabled
    # the predictor read each card's vector (latest row) and logged it, untransformed and not
    fv = inference["feature_view"]
    log = fv.read_log()
    assert len(log) == 1 + len(inference["cc_nums"])  # cell 12, then one per card in cell 13
    assert set(log["model_name"]) == {"xgboost_fraud_online_model"}
    latest = feature["trans_df"].sort_values("datetime").groupby("cc_num").tail(1)
    amount = dict(zip(latest["cc_num"], latest["amount"], strict=True))
    assert log["amount"].tolist() == [amount[int(c)] for c in [inference["cc_num"],
                                                                *inference["cc_nums"]]]
    assert "label_encoder_country_" in fv.read_log(transformed=True).columns
