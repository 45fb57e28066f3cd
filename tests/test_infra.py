"""infra/: the team stack's compose file and images are pinned, health-checked, wired in order, and valid.

The compose file is validated on every run against the Compose Specification's JSON schema, vendored in
infra/compose-spec/ (Apache-2.0, with its licence). `docker compose config` runs as an extra check where
Docker with the compose plugin exists and skips, saying so, where it does not (likewise the legacy
`docker-compose config`). The rest reads the files themselves, so it runs everywhere: pinned images
(compose services and Dockerfile bases), a healthcheck on every long-running service, dependants that
wait for health, MLflow's allowed hosts (checked for real against an `mlflow server` on 127.0.0.1
started with the same setting).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
import urllib.error
import urllib.request
from importlib import metadata as importlib_metadata
from pathlib import Path
from urllib.parse import urlparse

import jsonschema
import pytest
import yaml
from registry_helpers import mlflow_server

REPO_ROOT = Path(__file__).resolve().parents[1]
INFRA = REPO_ROOT / "infra"
COMPOSE = INFRA / "docker-compose.yaml"
COMPOSE_SCHEMA = INFRA / "compose-spec" / "compose-spec.json"
DOCKERFILES = sorted(INFRA.glob("Dockerfile*"))
ONE_SHOT = "service_completed_successfully"
# a version, not a moving name: digits with a separator (16.10, 3.8.7, 12.8.1, RELEASE.2025-09-07...)
PINNED_TAG = re.compile(r"\d+[.-]\d+")


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _services() -> dict[str, dict]:
    return _compose()["services"]


def _default(value: str) -> str:
    """`${VAR:-default}` -> default (what the file gives when the variable is not set)."""
    match = re.fullmatch(r"\$\{\w+:-(.*)\}", value.strip())
    return match.group(1) if match else value


def _tag_problem(image: str) -> str | None:
    name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    if not tag:
        return "no tag"
    if "latest" in tag or not PINNED_TAG.search(tag):
        return f"tag {tag!r} is not a version"
    return None


def _compose_schema_errors(path: Path) -> list[str]:
    """Where a compose file breaks the Compose Specification: one line per error, with its YAML path."""
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    # The schema declares draft-07 by an https URI that `validator_for` does not map, so name the draft.
    validator = jsonschema.Draft7Validator(schema)
    document = yaml.safe_load(path.read_text())
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(top level)'}: {error.message[:300]}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]


def test_compose_schema_is_vendored_with_its_licence() -> None:
    jsonschema.Draft7Validator.check_schema(json.loads(COMPOSE_SCHEMA.read_text()))
    assert "Apache License" in (COMPOSE_SCHEMA.parent / "LICENSE").read_text()
    assert "Compose Specification" in (COMPOSE_SCHEMA.parent / "NOTICE").read_text()


def test_compose_file_matches_the_compose_specification_schema() -> None:
    errors = _compose_schema_errors(COMPOSE)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize(
    ("good", "bad", "where"),
    [
        ("    healthcheck:      ", "    healthchek:       ", "services/mlflow"),
        ("volumes:\n  postgres:", "volume:\n  postgres:", "(top level)"),
        ("{condition: service_healthy}", "{condition: service_happy}", "depends_on"),
    ],
    ids=["misspelled-service-key", "unknown-top-level-key", "invalid-condition"],
)
def test_compose_schema_check_rejects_a_broken_copy(tmp_path: Path, good: str, bad: str, where: str) -> None:
    """The same check on a copy with one deliberate mistake fails and says where the mistake is."""
    text = COMPOSE.read_text()
    assert good in text, f"the compose file no longer has {good!r}: update this case"
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(text.replace(good, bad, 1))
    errors = _compose_schema_errors(broken)
    assert errors, f"a copy with {bad!r} passed the schema"
    assert any(where in error for error in errors), errors


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on this machine: `docker compose config` not run")
    version = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        pytest.skip(
            f"docker has no compose plugin here ({version.stderr.strip().splitlines()[0][:160]}): not run"
        )
    env = {"POSTGRES_PASSWORD": "x", "MINIO_ROOT_PASSWORD": "y", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    done = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr


def test_legacy_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    """Compose v1 (`docker-compose`, Debian 12's package) validates the same schema without a daemon;
    it predates the top-level `name:`, so a copy without that line is checked."""
    legacy = shutil.which("docker-compose")
    if legacy is None:
        pytest.skip("no docker-compose (v1) on this machine: legacy validation not run")
    copy = INFRA / f".compose-check-{tmp_path.name}.yaml"  # relative paths resolve from infra/
    copy.write_text(
        "".join(line for line in COMPOSE.read_text().splitlines(True) if not line.startswith("name:"))
    )
    try:
        done = subprocess.run(
            [legacy, "-f", str(copy), "config", "--quiet"],
            capture_output=True,
            text=True,
            timeout=120,
            env={"POSTGRES_PASSWORD": "x", "MINIO_ROOT_PASSWORD": "y", "PATH": "/usr/bin:/bin"},
        )
    finally:
        copy.unlink()
    assert done.returncode == 0, done.stderr


def test_every_image_is_pinned_to_a_version() -> None:
    problems = {}
    for name, service in _services().items():
        image = service.get("image")
        if image is None:
            problems[name] = "no image: (a built service needs a versioned image name too)"
        elif problem := _tag_problem(image):
            problems[name] = f"{image}: {problem}"
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        bases = re.findall(r"^FROM\s+(\S+)", text, flags=re.M) + re.findall(r"COPY\s+--from=(\S+)", text)
        assert bases, dockerfile
        for image in bases:
            if problem := _tag_problem(image):
                problems[f"{dockerfile.name}: {image}"] = problem
    assert not problems, problems


def test_every_long_running_service_has_a_healthcheck_and_dependants_wait_for_it() -> None:
    services = _services()
    one_shots = {
        target
        for service in services.values()
        for target, dep in (service.get("depends_on") or {}).items()
        if dep.get("condition") == ONE_SHOT
    }
    assert {"minio-buckets", "deploy"} <= one_shots
    servers = {"postgres", "minio", "prefect-server", "mlflow"}
    assert servers <= set(services)
    missing = [
        n for n in services if n not in one_shots and "test" not in (services[n].get("healthcheck") or {})
    ]
    assert not missing, f"long-running services without a healthcheck: {missing}"
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on as a list starts without waiting"
        for target, dep in depends.items():
            wanted = ONE_SHOT if target in one_shots else "service_healthy"
            assert dep.get("condition") == wanted, f"{name} -> {target}: {dep}"
    # whoever talks to a server waits for it
    assert set(services["prefect-server"]["depends_on"]) == {"postgres"}
    assert {"postgres", "minio"} <= set(services["mlflow"]["depends_on"])
    for worker in ("worker-cpu", "worker-gpu"):
        assert {"prefect-server", "mlflow", "deploy"} <= set(services[worker]["depends_on"])
    assert "prefect-server" in services["deploy"]["depends_on"]


def _allowed_hosts() -> list[str]:
    mlflow = _services()["mlflow"]
    env = mlflow.get("environment") or {}
    if "MLFLOW_SERVER_ALLOWED_HOSTS" in env:
        value = _default(env["MLFLOW_SERVER_ALLOWED_HOSTS"])
    else:
        match = re.search(r"--allowed-hosts[ =](\S+)", mlflow.get("command", ""))
        assert match, "mlflow: neither MLFLOW_SERVER_ALLOWED_HOSTS nor --allowed-hosts is set"
        value = match.group(1).strip("'\"")
    return [h.strip() for h in value.split(",")]


def test_mlflow_allows_the_host_the_workers_use() -> None:
    hosts = _allowed_hosts()
    worker_uri = _compose()["x-simpair-env"]["MLFLOW_TRACKING_URI"]
    netloc = urlparse(worker_uri).netloc
    assert netloc in hosts and "localhost:*" in hosts, hosts
    for name in ("worker-cpu", "worker-gpu", "deploy"):
        assert _services()[name]["environment"]["MLFLOW_TRACKING_URI"] == worker_uri


@pytest.mark.integration
def test_mlflow_server_with_these_allowed_hosts_answers_the_workers_and_refuses_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow 3 checks the Host header: `mlflow:5000` must pass, an unknown name must get 403."""
    monkeypatch.setenv("MLFLOW_SERVER_ALLOWED_HOSTS", ",".join(_allowed_hosts()))
    worker_host = urlparse(_compose()["x-simpair-env"]["MLFLOW_TRACKING_URI"]).netloc

    def status(url: str, host: str) -> int:
        request = urllib.request.Request(
            f"{url}/api/2.0/mlflow/experiments/search?max_results=1", headers={"Host": host}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    with mlflow_server(tmp_path / "mlflow") as server:
        port = urlparse(server.url).port
        assert status(server.url, worker_host) == 200
        assert status(server.url, f"localhost:{port}") == 200
        assert status(server.url, "mlflow.attacker.example") == 403


def test_gpu_worker_uses_a_cuda_image_and_reserves_a_gpu() -> None:
    gpu = _services()["worker-gpu"]
    assert gpu["build"]["dockerfile"] == "infra/Dockerfile.gpu"
    text = (INFRA / "Dockerfile.gpu").read_text()
    assert re.search(r"^FROM nvidia/cuda:\S+-runtime-", text, flags=re.M)
    assert re.search(r"download\.pytorch\.org/whl/\$\{TORCH_CUDA\}", text) and "TORCH_CUDA=cu" in text
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert "--pool gpu" in gpu["command"] and "--pool cpu" in _services()["worker-cpu"]["command"]
    assert "whl/cpu" in (INFRA / "Dockerfile").read_text()


def test_images_hold_every_installed_folder_and_workers_see_the_sources() -> None:
    package_dirs = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    for dockerfile in DOCKERFILES:
        copied = set(re.findall(r"^COPY\s+(\S+)\s+\./\S+", dockerfile.read_text(), flags=re.M))
        assert set(package_dirs.values()) <= copied, f"{dockerfile.name} copies {sorted(copied)}"
        assert "constraints.txt" in dockerfile.read_text()
    env = _compose()["x-simpair-env"]
    for name in ("worker-cpu", "worker-gpu"):
        targets = [re.sub(r":(ro|rw)$", "", v).rsplit(":", 1)[-1] for v in _services()[name]["volumes"]]
        assert env["SIMPAIR_SOURCES"] in targets and "/data" in targets, targets
        assert env["SIMPAIR_HOME"].startswith("/data/")


def test_readme_says_what_runs_where() -> None:
    readme = (INFRA / "README.md").read_text()
    for service in _services():
        assert f"`{service}`" in readme, f"infra/README.md does not mention {service}"
    for words in ("ingest", "scoring", "train-and-evaluate", "nightly-score", "/data/sources", "s3://"):
        assert words in readme, words


def test_pinned_versions_agree_with_each_other_and_with_the_tested_environment() -> None:
    """The Prefect server runs the project image, and its constraints name the versions tested here."""
    pins = dict(
        line.split("==", 1)
        for line in (INFRA / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    # the server's Prefect and fastapi come from constraints.txt, not from a prebuilt image's own resolution
    server, mlflow = _services()["prefect-server"], _services()["mlflow"]
    assert (server.get("build"), server["image"]) == (mlflow["build"], mlflow["image"]), server
    for package in ("prefect", "mlflow", "torch", "transformers", "fastapi"):
        installed = importlib_metadata.version(package).split("+", 1)[0]
        assert pins[package] == installed, f"{package}: constraints {pins[package]}, tested with {installed}"
    for dockerfile in DOCKERFILES:
        torch_arg = re.search(r"^ARG TORCH_VERSION=(\S+)", dockerfile.read_text(), flags=re.M)
        assert torch_arg and torch_arg.group(1) == pins["torch"], dockerfile.name
