"""Start, inspect and stop a real one-machine stack: Prefect server, MLflow server, a cpu and a gpu worker.

`up` starts, each in its own process group and bound to 127.0.0.1 on a free port:
- `prefect server start` (SQLite under `<home>/stack/prefect/`, scheduler and trigger services on);
- `mlflow server` (SQLite registry and local artifacts under `<home>/stack/mlflow/`, served through
  the server so workers on other machines could reach them; allowed hosts set);
- one process worker per work pool (`prefect worker start --pool cpu|gpu --type process`; the first
  start creates the pool), running flows with this project's Python, `HF_HUB_OFFLINE=1`, the same
  `SIMPAIR_HOME`, `PREFECT_SERVER_ANALYTICS_ENABLED=false`;
then applies the deployments (`python -m simpair.flows.deployments apply`).
It writes `<home>/stack/stack.json` (URLs, ports, PIDs, log files), `<home>/stack/env` (the exports a
shell or a test needs: `PREFECT_API_URL`, `MLFLOW_TRACKING_URI`, `SIMPAIR_HOME`) and the logs under
`<home>/stack/logs/`. `down` stops every process it started by PID (the whole process group and any
flow-run processes below it: SIGTERM, then SIGKILL), `status` says which are alive.
Subprocesses only: this module never imports Prefect or MLflow.

    python -m simpair.local_stack up|down|status [--home DIR]   (make stack-up / stack-down / stack-status)
    python -m simpair.local_stack worker gpu [--home DIR]       (one more worker, e.g. after one died)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from simpair import settings

HOST = "127.0.0.1"
POOLS = ("cpu", "gpu")
START_TIMEOUT_SECONDS = 240.0


class StackError(RuntimeError):
    """The stack could not start (the message names the process and its log), or is not running."""


@dataclass
class Proc:
    name: str
    pid: int
    log: str
    argv: list[str]


@dataclass
class Stack:
    home: str
    prefect_url: str  # the API, ending in /api
    mlflow_url: str
    ui_url: str
    processes: list[Proc] = field(default_factory=list)
    started_at: float = 0.0

    def env(self) -> dict[str, str]:
        """What a client of this stack (a shell, a test, `simpair` itself) sets."""
        return {
            "PREFECT_API_URL": self.prefect_url,
            "MLFLOW_TRACKING_URI": self.mlflow_url,
            "SIMPAIR_HOME": self.home,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "HF_HUB_OFFLINE": "1",
        }


def stack_dir(home: str | Path | None = None) -> Path:
    return settings.home_dir(home) / "stack"


def mlflow_server_argv(mlflow: str, port: int, store: Path, artifacts: Path) -> list[str]:
    """`mlflow server` on loopback with one worker, a SQLite store and a local artifact folder."""
    return [
        mlflow,
        "server",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{store}",
        "--artifacts-destination",
        str(artifacts),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def read_stack(home: str | Path | None = None) -> Stack | None:
    path = stack_dir(home) / "stack.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    data["processes"] = [Proc(**p) for p in data.get("processes", [])]
    return Stack(**data)


def _write(stack: Stack, root: Path) -> None:
    (root / "stack.json").write_text(json.dumps(asdict(stack), indent=2) + "\n")
    lines = [f"export {k}={v}" for k, v in stack.env().items()]
    (root / "env").write_text("\n".join(lines) + "\n")


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _pool_exists(api: str, pool: str) -> bool:
    request = urllib.request.Request(f"{api}/work_pools/{pool}", method="GET")
    try:
        with urllib.request.urlopen(request, timeout=3) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is dead
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _is_ours(proc: Proc) -> bool:
    """The PID is still the session leader we started (`start_new_session`), not a reused PID."""
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return alive(proc.pid)  # no /proc: trust the PID
    return int(fields[3]) == proc.pid


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (flow runs a worker started in sessions of their own included)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_process(proc: Proc, grace: float = 15.0) -> str:
    """SIGTERM the process group and its descendants, SIGKILL what is left after `grace` seconds."""
    if not alive(proc.pid) or not _is_ours(proc):
        return f"{proc.name}: not running (pid {proc.pid})"
    targets = [proc.pid, *_descendants(proc.pid)]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(pid) for pid in targets):
        time.sleep(0.2)
    left = [pid for pid in targets if alive(pid)]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(proc.pid, os.WNOHANG)
    return f"{proc.name}: stopped (pid {proc.pid})" + (" with SIGKILL" if left else "")


class _Starter:
    """Starts processes with one environment, logs under `root/logs`, and remembers them."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.procs: list[Proc] = []
        self.popens: dict[str, subprocess.Popen] = {}
        (root / "logs").mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> Proc:
        log = self.root / "logs" / f"{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.env, **(extra_env or {})},
                cwd=str(settings.PROJECT_ROOT),
                start_new_session=True,  # its own process group: `down` stops it and its children
            )
        proc = Proc(name, popen.pid, str(log), argv)
        self.procs.append(proc)
        self.popens[name] = popen
        return proc

    def check(self, name: str) -> None:
        popen = self.popens[name]
        if popen.poll() is not None:
            log = Path(self.procs[[p.name for p in self.procs].index(name)].log)
            tail = log.read_text(errors="replace")[-3000:]
            raise StackError(f"{name} exited with code {popen.returncode} during start-up; {log}:\n{tail}")


def _wait_until(what: str, ready, starter: _Starter, names: list[str], deadline: float) -> None:
    while not ready():
        for name in names:
            starter.check(name)
        if time.monotonic() > deadline:
            raise StackError(
                f"{what} not ready after {START_TIMEOUT_SECONDS:.0f} s (logs in {starter.root}/logs)"
            )
        time.sleep(0.5)


def up(
    home: str | Path | None = None,
    *,
    python: str | None = None,
    ui: bool = True,
    worker_poll_seconds: float = 5.0,
    apply: bool = True,
    extra_env: dict[str, str] | None = None,
    timeout: float = START_TIMEOUT_SECONDS,
) -> Stack:
    """Start the stack for `home` (see the module docstring); refuse if one is already running there."""
    home_path = settings.home_dir(home)
    root = stack_dir(home_path)
    running = read_stack(home_path)
    if running and any(alive(p.pid) and _is_ours(p) for p in running.processes):
        raise StackError(f"a stack is already running for {home_path} (see {root}/stack.json); stop it first")
    root.mkdir(parents=True, exist_ok=True)
    python = python or sys.executable
    bin_dir = Path(python).parent
    prefect, mlflow = str(bin_dir / "prefect"), str(bin_dir / "mlflow")
    prefect_port, mlflow_port = free_port(), free_port()
    stack = Stack(
        home=str(home_path),
        prefect_url=f"http://{HOST}:{prefect_port}/api",
        mlflow_url=f"http://{HOST}:{mlflow_port}",
        ui_url=f"http://{HOST}:{prefect_port}",
        started_at=time.time(),
    )
    base = _process_env(root, bin_dir, stack, extra_env)
    base.pop("PREFECT_API_URL")  # the servers themselves are not clients
    base.pop("MLFLOW_TRACKING_URI")
    starter = _Starter(root, base)
    deadline = time.monotonic() + timeout
    try:
        starter.start(
            "prefect-server",
            [prefect, "server", "start", "--host", HOST, "--port", str(prefect_port), "--analytics-off"]
            + ([] if ui else ["--no-ui"]),
            {
                "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{root}/prefect/prefect.db",
                "PREFECT_SERVER_API_HOST": HOST,
            },
        )
        (root / "mlflow").mkdir(exist_ok=True)
        starter.start(
            "mlflow-server",
            mlflow_server_argv(
                mlflow, mlflow_port, root / "mlflow" / "mlflow.db", root / "mlflow" / "artifacts"
            )
            + ["--allowed-hosts", f"{HOST}:{mlflow_port},localhost:{mlflow_port},{HOST},localhost"],
        )
        _wait_until(
            "prefect server",
            lambda: _healthy(f"{stack.prefect_url}/health"),
            starter,
            ["prefect-server"],
            deadline,
        )
        _wait_until(
            "mlflow server",
            lambda: _healthy(f"{stack.mlflow_url}/health"),
            starter,
            ["mlflow-server"],
            deadline,
        )
        client = {**stack.env(), "PREFECT_WORKER_QUERY_SECONDS": f"{worker_poll_seconds:g}"}
        for pool in POOLS:
            starter.start(f"worker-{pool}", _worker_argv(prefect, pool, f"{pool}-local"), client)
        _write(stack_with(stack, starter), root)  # so `down` finds them even if the rest fails
        workers = [f"worker-{pool}" for pool in POOLS]
        _wait_until(
            "work pools cpu and gpu",
            lambda: all(_pool_exists(stack.prefect_url, pool) for pool in POOLS),
            starter,
            workers,
            deadline,
        )
        if apply:
            applied = subprocess.run(
                [python, "-m", "simpair.flows.deployments", "apply"],
                env={**base, **client},
                cwd=str(settings.PROJECT_ROOT),
                capture_output=True,
                text=True,
                timeout=max(30.0, deadline - time.monotonic()),
            )
            (root / "logs" / "apply.log").write_text(applied.stdout + applied.stderr)
            if applied.returncode != 0:
                raise StackError(
                    f"applying the deployments failed:\n{(applied.stdout + applied.stderr)[-3000:]}"
                )
    except BaseException:
        for proc in reversed(starter.procs):
            stop_process(proc, grace=5)
        raise
    _write(stack_with(stack, starter), root)
    return stack


def _process_env(root: Path, bin_dir: Path, stack: Stack, extra: dict[str, str] | None) -> dict[str, str]:
    """This environment, with the project's Python first on PATH, the stack's URLs and home, quiet
    defaults (no analytics, no hub downloads) and INFO logs (a worker's log names each flow run)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
    env.update(
        {
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "PREFECT_HOME": str(root / "prefect"),
            "PREFECT_LOGGING_LEVEL": "INFO",
            "TOKENIZERS_PARALLELISM": "false",
            **stack.env(),
            **(extra or {}),
        }
    )
    return env


def _worker_argv(prefect: str, pool: str, name: str) -> list[str]:
    return [prefect, "worker", "start", "--pool", pool, "--type", "process", "--name", name]


def start_worker(
    home: str | Path | None, pool: str, *, python: str | None = None, worker_poll_seconds: float = 5.0
) -> Proc:
    """One more process worker for `pool` on the running stack (e.g. after one died); recorded for `down`."""
    stack = read_stack(home)
    if stack is None:
        raise StackError(f"no stack recorded under {stack_dir(home)} (make stack-up)")
    root = stack_dir(home)
    bin_dir = Path(python or sys.executable).parent
    env = _process_env(root, bin_dir, stack, {"PREFECT_WORKER_QUERY_SECONDS": f"{worker_poll_seconds:g}"})
    starter = _Starter(root, env)
    number = sum(p.name.startswith(f"worker-{pool}") for p in stack.processes) + 1
    proc = starter.start(
        f"worker-{pool}-{number}", _worker_argv(str(bin_dir / "prefect"), pool, f"{pool}-local-{number}")
    )
    stack.processes.append(proc)
    _write(stack, root)
    return proc


def stack_with(stack: Stack, starter: _Starter) -> Stack:
    stack.processes = list(starter.procs)
    return stack


def down(home: str | Path | None = None) -> list[str]:
    """Stop every process the stack started (workers first, servers last); one line per process."""
    stack = read_stack(home)
    if stack is None:
        return [f"no stack recorded under {stack_dir(home)}"]
    lines = [stop_process(proc) for proc in reversed(stack.processes)]
    return lines


def status(home: str | Path | None = None) -> tuple[bool, list[str]]:
    """(all alive and healthy, one line per process and server)."""
    stack = read_stack(home)
    if stack is None:
        return False, [f"no stack recorded under {stack_dir(home)} (make stack-up)"]
    ok, lines = True, []
    for proc in stack.processes:
        up_ = alive(proc.pid) and _is_ours(proc)
        ok &= up_
        lines.append(f"{proc.name:15} pid {proc.pid:<8} {'alive' if up_ else 'DEAD'}   log {proc.log}")
    for name, url in (
        ("prefect api", f"{stack.prefect_url}/health"),
        ("mlflow", f"{stack.mlflow_url}/health"),
    ):
        healthy = _healthy(url)
        ok &= healthy
        lines.append(
            f"{name:15} {url.removesuffix('/health'):40} {'healthy' if healthy else 'NOT RESPONDING'}"
        )
    lines.append(f"{'prefect ui':15} {stack.ui_url}")
    lines.append(f"env: source {stack_dir(home) / 'env'}")
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simpair.local_stack", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=["up", "down", "status", "worker"])
    parser.add_argument("pool", nargs="?", choices=POOLS, help="worker: the pool to add a worker to")
    parser.add_argument("--home", default=None, help="pipeline home (default $SIMPAIR_HOME, else .simpair/)")
    parser.add_argument("--no-ui", action="store_true", help="start the Prefect server without its UI")
    args = parser.parse_args(argv)
    if args.command == "up":
        try:
            stack = up(args.home, ui=not args.no_ui)
        except StackError as exc:
            print(f"stack-up failed: {exc}", file=sys.stderr)
            return 1
        for proc in stack.processes:
            print(f"started {proc.name:15} pid {proc.pid:<8} log {proc.log}")
        print(f"prefect api  {stack.prefect_url}   (ui {stack.ui_url})")
        print(f"mlflow       {stack.mlflow_url}")
        print(
            "deployments  nightly-retrain/nightly, nightly-score/nightly (cpu), train-and-evaluate/gpu (gpu)"
        )
        print(f"use it:      source {stack_dir(args.home) / 'env'}")
        return 0
    if args.command == "worker":
        if args.pool is None:
            parser.error("worker needs a pool: cpu or gpu")
        try:
            proc = start_worker(args.home, args.pool)
        except StackError as exc:
            print(f"stack worker failed: {exc}", file=sys.stderr)
            return 1
        print(f"started {proc.name:15} pid {proc.pid:<8} log {proc.log}")
        return 0
    if args.command == "down":
        for line in down(args.home):
            print(line)
        return 0
    ok, lines = status(args.home)
    for line in lines:
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
