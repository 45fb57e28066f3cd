"""The nightly retraining flow for real: Prefect's temporary API, embedded MLflow, the smoke profile.

One sequential story per test (each smoke night trains two tiny models in seconds):
first night registers and gates; an unchanged night skips; --force registers version 2; a permanent
training failure leaves the registry exactly as it was; a dead tracking server fails the night early
with a clear error; a second concurrent night exits with a message. The first night is run once for
the module (`first_night`): `simpair nightly --no-prefect` on a second home must register, mark and
gate exactly what it did.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient
from mlflow_store import seed_store
from prefect_artifacts import newest_artifact as _artifact
from registry_helpers import MlflowServer, one_torch_thread  # noqa: F401 - fixture

from simpair import settings
from simpair.flows.launch import nightly as run
from simpair.nightly.night import night_in_process
from simpair.nightly.plan import read_state
from simpair.nightly.summary import NightlyFailed, NightlySummary
from simpair.registry import registry, resolve_model
from simpair.runtime.loader import load_predictor

pytestmark = [
    pytest.mark.usefixtures("prefect_api", "one_torch_thread"),
    pytest.mark.slow,
    pytest.mark.integration,
]
NAMES = ("simpair-paraphrase", "simpair-sts")


def _aliases(c: MlflowClient, name: str) -> dict[str, str]:
    return {alias: str(version) for alias, version in (c.get_registered_model(name).aliases or {}).items()}


def registry_snapshot(uri: str) -> dict[str, object]:
    """Every version, alias and the champion history of both models: what must not change on failure."""
    c = MlflowClient(tracking_uri=uri, registry_uri=uri)
    snap: dict[str, object] = {}
    for name in NAMES:
        versions = registry.list_versions(c, name)
        snap[name] = {
            "versions": sorted(str(v.version) for v in versions),
            "aliases": _aliases(c, name) if versions else {},
            "history": (c.get_registered_model(name).tags or {}).get("champion_history")
            if versions
            else None,
        }
    return snap


def _bad_profile(tmp_path: Path) -> Path:
    """The smoke profile with the sts training config pointing at a backbone that does not exist."""
    config = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "smoke-sts.yaml").read_text())
    config["backbone"] = str(tmp_path / "no-such-backbone")
    bad_config = tmp_path / "smoke-sts-broken.yaml"
    bad_config.write_text(yaml.safe_dump(config))
    profile = yaml.safe_load((settings.PROJECT_ROOT / "configs" / "nightly-smoke.yaml").read_text())
    profile["tasks"]["sts"]["config"] = str(bad_config)
    path = tmp_path / "nightly-broken.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


@dataclass(frozen=True)
class FirstNight:
    home: Path
    result: NightlySummary
    registry: dict[str, dict[str, object]]  # `_registry(home)` right after it, before later nights


@pytest.fixture(scope="module")
def first_night(
    prefect_api: None, shared_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FirstNight]:
    """The smoke profile's first night through the `nightly-retrain` flow, on a fresh home."""
    import torch

    home = seed_store(tmp_path_factory.mktemp("first-night") / "home").parents[1]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as monkeypatch:  # undone before the tests: each sets its own
        monkeypatch.setenv("SIMPAIR_HOME", str(home))
        monkeypatch.setenv("MLFLOW_TRACKING_URI", _uri(home))
        try:
            night = FirstNight(home, run(profile="smoke", home=home, sources=shared_data), _registry(home))
        finally:
            torch.set_num_threads(threads)
    yield night


def _uri(home: Path) -> str:
    """The home's embedded store (`settings.tracking_uri` would return $MLFLOW_TRACKING_URI if set)."""
    return f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"


def _registry(home: Path) -> dict[str, dict[str, object]]:
    """Per model: versions, aliases, gate decisions, and the dev and test metrics each version carries."""
    c = MlflowClient(tracking_uri=_uri(home), registry_uri=_uri(home))
    out: dict[str, dict[str, object]] = {}
    for name in NAMES:
        versions = sorted(c.search_model_versions(f"name='{name}'"), key=lambda v: int(v.version))
        out[name] = {
            "versions": [str(v.version) for v in versions],
            "aliases": {a: str(v) for a, v in (c.get_registered_model(name).aliases or {}).items()},
            "decisions": [v.tags.get("gate.decision") for v in versions],
            "metrics": [_quality(v.tags) for v in versions],
            "precision": [sorted(k for k in v.tags if k.startswith("simpair.precision.")) for v in versions],
            "prefect": [v.tags.get("prefect.flow_run_id") for v in versions],
        }
    return out


def _runs_since(started: datetime) -> list[dict[str, Any]]:
    """Every flow run and task run the temporary API started after `started` (a local server: one clock)."""
    from prefect.client.orchestration import get_client

    after = {"start_time": {"after_": started.isoformat()}}
    runs: list[dict[str, Any]] = []
    with get_client(sync_client=True) as client:
        for kind in ("flow_runs", "task_runs"):
            body = {kind: after, "limit": 200, "offset": 0}
            response = client.request("POST", f"/{kind}/filter", json=body)
            runs += response.json()
    return runs


def _quality(tags: dict[str, str]) -> dict[str, float]:
    return {k: round(float(v), 4) for k, v in tags.items() if k.startswith(("metric.dev", "metric.eval"))}


def test_the_night_writes_one_report_page_and_publishes_it(first_night: FirstNight) -> None:
    """The night's report (`simpair.nightly.report`) from the smoke night's real outputs: its ingest,
    training, each gate with its canaries and precision verdict, no scoring yet (nightly-score starts
    when the night completes), as `<home>/reports/<date>-<run>/night.md` and the `night-report` artifact."""
    summary = first_night.result
    assert summary.flow_run_id
    (page,) = (first_night.home / "reports").glob(f"*-{summary.flow_run_id[:8]}/night.md")
    text = page.read_text()
    assert text.startswith(f"# The night of {page.parent.name[:10]}") and text == _artifact("night-report")
    ingested = {r.dataset for r in summary.ingest if r.status == "ingested"}
    assert {"msrp", "stsb"} <= ingested and all(r.split for r in summary.ingest if r.status == "ingested")
    assert "| msrp | train | ingested |" in text and "Quarantined tonight:" in text
    for t in summary.tasks:
        assert t.gate_report and t.precision  # the gate's report and the precision verdict, kept
        assert f"| {t.task} | {t.model} | 1 | {t.train_seconds:.0f} s |" in text
        assert f"| {t.model} | 1 | **{t.decision}** | none | {t.precision}" in text
        assert f"#### {t.model}: challenger v1 **{t.decision}**" in text
    assert "## Scored\n\nNo scoring in this night" in text and "## Accuracy on your traffic" in text


def test_no_prefect_night_registers_and_gates_as_the_flow_does(
    first_night: FirstNight, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`simpair nightly --no-prefect` (a real subprocess, with Prefect's URL pointing at a dead port)
    registers, marks and gates what the flow's first night did on the same data."""
    local_home = seed_store(tmp_path / "local").parents[1]
    exe = shutil.which("simpair", path=str(Path(sys.executable).parent)) or "simpair"
    env = {
        **os.environ,
        "SIMPAIR_HOME": str(local_home),
        "MLFLOW_TRACKING_URI": _uri(local_home),
        "PREFECT_API_URL": "http://127.0.0.1:9/api",  # nothing listens there: any Prefect call would fail
        "OMP_NUM_THREADS": "1",
    }
    argv = [exe, "nightly", "--no-prefect", "--profile", "smoke", "--sources", str(shared_data)]
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Nightly retrain (smoke): trained" in ran.stdout
    (local_page,) = (local_home / "reports").glob("*-local-*/night.md")  # the report, in process too
    assert f"nightly: report {local_page}" in ran.stdout

    by_flow, flow, local = first_night.result, first_night.registry, _registry(local_home)
    for name in NAMES:
        assert local[name]["versions"] == ["1"] and local[name]["aliases"]["challenger"] == "1"
        assert local[name]["prefect"] == [None] and flow[name]["prefect"] == [by_flow.flow_run_id]
        assert len(local[name]["metrics"][0]) >= 2  # type: ignore[index, arg-type]
        assert local[name]["precision"][0]  # type: ignore[index] - the ladder's verdict, measured here too
        # the verdict's figures: the rungs' speeds (and so the chosen rung) are measured, not compared
        for key in ("versions", "aliases", "decisions", "metrics", "precision"):
            assert local[name][key] == flow[name][key], (name, key)
    state = read_state(local_home, "smoke")
    assert state is not None and state.versions == {"paraphrase": "1", "sts": "1"}
    assert state.decisions == {t.task: t.decision for t in by_flow.tasks}

    monkeypatch.setenv("SIMPAIR_HOME", str(local_home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", _uri(local_home))
    again = night_in_process(profile="smoke", home=local_home, sources=shared_data)  # in this process
    assert again.status == "skipped" and "no source or training config changed" in again.message
    assert _registry(local_home) == local


def test_nightly_registers_skips_forces_and_survives_a_permanent_failure(
    first_night: FirstNight, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, first = first_night.home, first_night.result
    uri = _uri(home)
    monkeypatch.setenv("SIMPAIR_HOME", str(home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert first.status == "trained" and [t.version for t in first.tasks] == ["1", "1"]
    c = MlflowClient(tracking_uri=uri, registry_uri=uri)
    for outcome in first.tasks:
        mv = c.get_model_version(outcome.model, "1")
        assert _aliases(c, outcome.model)["challenger"] == "1"
        assert mv.tags["gate.decision"] == outcome.decision and mv.tags["gate.reason"] == outcome.reason
        assert mv.tags["dataset_version." + ("msrp" if outcome.task == "paraphrase" else "stsb")]
        assert mv.tags["prefect.flow_run_id"] == first.flow_run_id
        champion = _aliases(c, outcome.model).get("champion")
        assert champion == ("1" if outcome.decision == "promoted" else None)
        assert "zero-shot" in outcome.reason  # a first version is judged against the untrained backbone
        mlrun = c.get_run(mv.run_id)
        assert mlrun.data.tags["prefect.flow_run_id"] == first.flow_run_id
        assert mlrun.data.params["name"] == f"smoke-{outcome.task}"  # the whole config, as params
        assert c.get_metric_history(mv.run_id, "train_loss")  # per-epoch curve
        files = {a.path for a in c.list_artifacts(mv.run_id, "model_files")}
        assert {"model_files/dev_pair_ids.txt", "model_files/train_config.yaml"} <= files
        assert "evaluation/report.md" in {a.path for a in c.list_artifacts(mv.run_id, "evaluation")}
        expected = {"msrp-train"} if outcome.task == "paraphrase" else {"stsb-train", "stsb-dev"}
        assert {d.dataset.name for d in mlrun.inputs.dataset_inputs} == expected
    assert f"simpair-paraphrase: challenger v1 **{first.tasks[0].decision}**" in _artifact("gate-paraphrase")
    assert "Nightly retrain (smoke): trained" in _artifact("nightly-retrain")
    state = read_state(home, "smoke")
    assert state is not None and state.versions == {"paraphrase": "1", "sts": "1"}

    before = registry_snapshot(uri)
    second = run(profile="smoke", home=home, sources=shared_data)
    assert second.status == "skipped" and "no source or training config changed" in second.message
    assert registry_snapshot(uri) == before

    forced = run(profile="smoke", home=home, sources=shared_data, force=True)
    assert forced.status == "trained" and [t.version for t in forced.tasks] == ["2", "2"]
    for outcome in forced.tasks:
        aliases = _aliases(c, outcome.model)
        assert aliases["challenger"] == "2"
        previous = before[outcome.model]["aliases"].get("champion")  # type: ignore[index]
        assert aliases.get("champion") == ("2" if outcome.decision == "promoted" else previous)

    # a permanent failure in one task (the second: the first trains fine) registers nothing at all
    before = registry_snapshot(uri)
    started = datetime.now(UTC)
    with pytest.raises(NightlyFailed) as failure:
        run(profile=str(_bad_profile(tmp_path)), home=home, sources=shared_data, force=True)
    message = str(failure.value)
    assert "failed while training 'sts'" in message and "no-such-backbone" in message
    assert "Nothing was registered; registry and aliases are unchanged" in message
    # not retried: a missing backbone is not transient, so the run that failed ran once (the profile
    # retries transient faults twice: a retried task or subflow run would count 3 runs)
    runs = _runs_since(started)
    assert [r for r in runs if r["state_type"] == "FAILED"], runs
    assert {r["name"]: r["run_count"] for r in runs if r["run_count"] != 1} == {}
    assert registry_snapshot(uri) == before
    assert read_state(home, "smoke").versions == {"paraphrase": "2", "sts": "2"}  # type: ignore[union-attr]


def test_dead_tracking_server_fails_the_night_early_and_moves_no_alias(
    home: Path, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = MlflowServer(tmp_path / "server")
    server.start()
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
        from registry_helpers import tiny_model

        from simpair.ingest import run_ingest
        from simpair.registry.record import mark_challenger, register_trained_model
        from simpair.selection.promotion import promote_manual

        assert run_ingest(sources=shared_data, home=home).ok
        model_dir = tiny_model(tmp_path / "m", home)
        registered = register_trained_model(home, model_dir, {"name": "m"}, {})
        mark_challenger(home, registered)
        promote_manual(home, registered.name, registered.version, reason="before the outage", by="test")
        # the registry round trip through the server: artifacts uploaded, downloaded, served as pyfunc
        resolved = resolve_model(f"{registered.name}@champion", home)
        assert resolved.version == "1" and (tmp_path / "server" / "artifacts").is_dir()
        pairs = pd.DataFrame({"text_a": ["a cat sat", "it rains"], "text_b": ["a cat sits", "sunny"]})
        served = mlflow.pyfunc.load_model(f"models:/{registered.name}@champion").predict(pairs)
        local = load_predictor(resolved.local_dir).predict(pairs.text_a.tolist(), pairs.text_b.tolist())
        np.testing.assert_allclose(served["score"].to_numpy(), local["score"], rtol=1e-6)
    finally:
        server.kill()
    # short limits for the night only: under load the live server above may take over 5 s to answer
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    backend = f"sqlite:///{tmp_path / 'server' / 'server.db'}"
    before = registry_snapshot(backend)
    started = time.monotonic()
    with pytest.raises(
        NightlyFailed, match=r"MLflow tracking store http://127\.0\.0\.1:\d+ is not reachable"
    ):
        run(profile="smoke", home=home, sources=shared_data, force=True)
    assert time.monotonic() - started >= 3.0  # the smoke profile's retry delays (1 s + 2 s) were waited
    assert registry_snapshot(backend) == before
    assert before["simpair-paraphrase"]["aliases"] == {"challenger": "1", "champion": "1"}  # type: ignore[index]
    assert not (home / "models").exists()  # nothing was trained either


def test_second_concurrent_nightly_exits_with_a_message(home: Path, shared_data: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom simpair.nightly.lock import nightly_lock\n"
            "with nightly_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n",
            str(home),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(NightlyFailed, match="another nightly run is in progress"):
            run(profile="smoke", home=home, sources=shared_data, wait_seconds=1)
    finally:
        holder.kill()
        holder.wait()
    assert not (home / "datasets").exists()  # it did nothing, not even ingest


def test_deployments_apply_with_cron_pools_trigger_and_one_run_at_a_time(home: Path) -> None:
    from prefect.client.orchestration import get_client

    from simpair.flows.deployments import (
        NIGHTLY_CRON,
        SCORE_CRON,
        gpu_deployment,
        nightly_deployment,
        score_deployment,
    )

    with get_client(sync_client=True) as client:
        for pool in ("cpu", "gpu"):
            response = client.request("POST", "/work_pools/", json={"name": pool, "type": "process"})
            assert response.status_code in (200, 201, 409)
        nightly = client.read_deployment(nightly_deployment().apply())
        gpu = client.read_deployment(gpu_deployment().apply())
        scoring = score_deployment()
        score = client.read_deployment(scoring.apply())
    assert nightly.work_pool_name == "cpu" and gpu.work_pool_name == "gpu" and score.work_pool_name == "cpu"
    assert (
        nightly.schedules[0].schedule.cron == NIGHTLY_CRON and score.schedules[0].schedule.cron == SCORE_CRON
    )
    for deployment in (nightly, score):
        limit = deployment.global_concurrency_limit
        assert limit is not None and limit.limit == 1
    assert nightly.parameters == {"profile": "default", "force": False}
    assert gpu.parameters == {"profile": "default"}  # only task_name is required
    assert score.parameters == {
        "inbox": str(home / "inbox"),
        "out": str(home / "scoring"),
        "model": "simpair-paraphrase@champion",
    }
    assert nightly.entrypoint == "simpair.flows.nightly_retrain.nightly_retrain"  # any working directory
    (trigger,) = scoring.triggers
    assert trigger.expect == {"prefect.flow-run.Completed"}
    assert trigger.match_related.model_dump() == {  # type: ignore[union-attr]
        "prefect.resource.role": "flow",
        "prefect.resource.name": "nightly-retrain",
    }
