"""Start, inspect and stop a real one-machine stack: Prefect server, MLflow server, a cpu and a gpu worker.

`up` starts, each in its own process group and bound to 127.0.0.1 on a free port:
- `prefect server start` (SQLite under `<home>/stack/prefect/`, scheduler and trigger services on);
- `mlflow server` (SQLite registry and local artifacts under `<home>/stack/mlflow/`, served through
  the server so workers on other machines could reach them; allowed hosts set; its GenAI job runner
  off unless `MLFLOW_SERVER_ENABLE_JOB_EXECUTION` says otherwise: tracking and the registry need
  none of it, and its nine helper processes cost about 35 s of CPU at each start, 2026-11-26);
- one process worker per work pool (`prefect worker start --pool cpu|gpu --type process`; the first
  start creates the pool), running flows with this project's Python, `HF_HUB_OFFLINE=1`, the same
  `SIMPAIR_HOME`, `PREFECT_SERVER_ANALYTICS_ENABLED=false`;
and, beside the workers, applies the deployments (`python -m simpair.flows.deployments apply`, which
waits for the pools the workers create while it imports the flows).
It writes `<home>/stack/stack.json` (URLs, ports, PIDs, log files), `<home>/stack/env` (the exports a
shell or a test needs: `PREFECT_API_URL`, `MLFLOW_TRACKING_URI`, `SIMPAIR_HOME`) and the logs under
`<home>/stack/logs/`. `down` stops every process it started by PID (the whole process group and any
flow-run processes below it: SIGTERM, then SIGKILL), `status` says which are alive now and how the
server sees each pool's workers. `restart` stops one service and starts it again with the same
command line, port and environment (the env file is left as it is, so shells that sourced it keep
working); restarting a pool's worker replaces every worker recorded for that pool.
Subprocesses only: this module never imports Prefect or MLflow.

    python -m simpair.ops.local_stack up|down|status [--home DIR]  (make stack-up/stack-down/stack-status)
    python -m simpair.ops.local_stack restart mlflow|prefect|worker-cpu|worker-gpu  (make stack-restart S=...)
    python -m simpair.ops.local_stack worker gpu [--home DIR]      (one more worker, e.g. after one died)
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
from datetime import datetime
from pathlib import Path

from simpair import settings

HOST = "127.0.0.1"
POOLS = ("cpu", "gpu")
START_TIMEOUT_SECONDS = 240.0
# `restart` names -> the process names `up` records
SERVICES = {
    "prefect": "prefect-server",
    "mlflow": "mlflow-server",
    "worker-cpu": "worker-cpu",
    "worker-gpu": "worker-gpu",
}


class StackError(RuntimeError):
    """The stack could not start (the message names the process and its log), or is not running."""


@dataclass
class Proc:
    name: str
    pid: int
    log: str
    argv: list[str]
    # what this process got on top of the caller's environment (database URL, poll interval, `up`'s
    # extra_env): `restart` starts it again the same way
    env: dict[str, str] = field(default_factory=dict)


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


def _write(stack: Stack, root: Path, *, env_file: bool = True) -> None:
    (root / "stack.json").write_text(json.dumps(asdict(stack), indent=2) + "\n")
    if env_file:
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


def pool_workers(api: str, pool: str) -> list[dict] | None:
    """The workers the server knows for `pool` (name, status, last_heartbeat_time); None if unreachable."""
    request = urllib.request.Request(
        f"{api}/work_pools/{pool}/workers/filter",
        data=json.dumps({"limit": 50}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None


def _heartbeat_age(worker: dict) -> float | None:
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return time.time() - datetime.fromisoformat(worker["last_heartbeat_time"]).timestamp()
    return None


def _port_free(port: int) -> bool:
    """Whether a server could bind `port` now (SO_REUSEADDR, as uvicorn sets: TIME_WAIT is no obstacle)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


def _pool_of(name: str) -> str | None:
    """`worker-gpu`, `worker-gpu-2` -> `gpu`; servers -> None."""
    parts = name.split("-")
    return parts[1] if parts[0] == "worker" and len(parts) > 1 else None


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
                cwd=str(settings.CHECKOUT or self.root),
                start_new_session=True,  # its own process group: `down` stops it and its children
            )
        proc = Proc(name, popen.pid, str(log), argv, dict(extra_env or {}))
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
    extra = dict(extra_env or {})
    deadline = time.monotonic() + timeout
    applying: subprocess.Popen | None = None
    try:
        starter.start(
            "prefect-server",
            [prefect, "server", "start", "--host", HOST, "--port", str(prefect_port), "--analytics-off"]
            + ([] if ui else ["--no-ui"]),
            {**extra, **_prefect_server_env(root, stack)},
        )
        (root / "mlflow").mkdir(exist_ok=True)
        starter.start(
            "mlflow-server",
            mlflow_server_argv(
                mlflow, mlflow_port, root / "mlflow" / "mlflow.db", root / "mlflow" / "artifacts"
            )
            + ["--allowed-hosts", f"{HOST}:{mlflow_port},localhost:{mlflow_port},{HOST},localhost"],
            {**mlflow_server_env(), **extra},
        )
        _wait_until(
            "prefect server",
            lambda: _healthy(f"{stack.prefect_url}/health"),
            starter,
            ["prefect-server"],
            deadline,
        )
        # the workers (each creates its pool) and the apply (which waits for the pools while it imports
        # the flows, half a minute of CPU) start side by side; neither needs the MLflow server
        client = {**stack.env(), "PREFECT_WORKER_QUERY_SECONDS": f"{worker_poll_seconds:g}"}
        for pool in POOLS:
            starter.start(
                f"worker-{pool}",
                _worker_argv(prefect, pool, f"{pool}-local"),
                {**extra, **client},
            )
        _write(stack_with(stack, starter), root)  # so `down` finds them even if the rest fails
        if apply:
            with (root / "logs" / "apply.log").open("w") as out:
                applying = subprocess.Popen(
                    [python, "-m", "simpair.flows.deployments", "apply"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**base, **client, "SIMPAIR_APPLY_POOL_WAIT_SECONDS": f"{max(30.0, timeout):g}"},
                    cwd=str(settings.CHECKOUT or root),
                    start_new_session=True,
                )
        workers = [f"worker-{pool}" for pool in POOLS]
        _wait_until(
            "mlflow server",
            lambda: _healthy(f"{stack.mlflow_url}/health"),
            starter,
            ["mlflow-server"],
            deadline,
        )
        _wait_until(
            "work pools cpu and gpu",
            lambda: all(_pool_exists(stack.prefect_url, pool) for pool in POOLS),
            starter,
            workers,
            deadline,
        )
        if applying is not None:
            try:
                code = applying.wait(timeout=max(30.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                applying.kill()
                applying.wait()
                raise StackError(f"applying the deployments timed out; {root}/logs/apply.log") from None
            if code != 0:
                tail = (root / "logs" / "apply.log").read_text(errors="replace")[-3000:]
                raise StackError(f"applying the deployments failed:\n{tail}")
    except BaseException:
        if applying is not None and applying.poll() is None:
            applying.kill()
            applying.wait()
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


def mlflow_server_env() -> dict[str, str]:
    """No GenAI job runner (online scoring, trace archival) unless the caller's environment asks for it."""
    name = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"
    return {name: os.environ.get(name, "false")}


def _prefect_server_env(root: Path, stack: Stack) -> dict[str, str]:
    return {
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{root}/prefect/prefect.db",
        "PREFECT_SERVER_API_HOST": HOST,
        "PREFECT_UI_URL": stack.ui_url,  # links in notifications (the automation's `ui_url` filter)
    }


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
    starter = _Starter(root, _process_env(root, bin_dir, stack, None))
    number = sum(p.name.startswith(f"worker-{pool}") for p in stack.processes) + 1
    proc = starter.start(
        f"worker-{pool}-{number}",
        _worker_argv(str(bin_dir / "prefect"), pool, f"{pool}-local-{number}"),
        {"PREFECT_WORKER_QUERY_SECONDS": f"{worker_poll_seconds:g}"},
    )
    stack.processes.append(proc)
    _write(stack, root, env_file=False)
    return proc


def restart(home: str | Path | None, service: str, *, timeout: float = START_TIMEOUT_SECONDS) -> list[str]:
    """Stop `service` (prefect, mlflow, worker-cpu, worker-gpu) and start it again as `up` did: same
    command line, port and environment; the env file is not touched. A pool's worker comes back as one
    `worker-<pool>` in place of every worker recorded for that pool (`worker` adds numbered ones).
    Returns one line per process stopped and started; raises StackError if it does not come back."""
    if service not in SERVICES:
        raise StackError(f"restart: unknown service {service!r}; one of {', '.join(SERVICES)}")
    stack = read_stack(home)
    if stack is None:
        raise StackError(f"no stack recorded under {stack_dir(home)} (make stack-up)")
    root = stack_dir(home)
    name, pool = SERVICES[service], _pool_of(SERVICES[service])
    matching = [p for p in stack.processes if (p.name == name if pool is None else _pool_of(p.name) == pool)]
    if not matching:
        raise StackError(f"restart {service}: no {name} recorded in {root / 'stack.json'}")
    template = next((p for p in matching if p.name == name), matching[0])
    lines = [stop_process(p) for p in matching]
    started_at = time.time()
    bin_dir = Path(template.argv[0]).parent
    env = _process_env(root, bin_dir, stack, None)
    if pool is None:
        env.pop("PREFECT_API_URL")  # the servers themselves are not clients
        env.pop("MLFLOW_TRACKING_URI")
        url = stack.prefect_url.removesuffix("/api") if name == "prefect-server" else stack.mlflow_url
        port = int(url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 10
        while not _port_free(port):
            if time.monotonic() > deadline:
                raise StackError(
                    f"restart {service}: port {port} is held by another process; "
                    "`make stack-down && make stack-up` starts the stack on new ports"
                )
            time.sleep(0.5)
        argv = template.argv
    else:
        argv = _worker_argv(template.argv[0], pool, f"{pool}-local")
    starter = _Starter(root, env)
    # a stack.json written before processes recorded their environment: what `up` gives them
    defaults = {"prefect-server": _prefect_server_env(root, stack), "mlflow-server": mlflow_server_env()}
    defaults = defaults.get(name, {})
    proc = starter.start(name, argv, {**defaults, **template.env})
    at = stack.processes.index(matching[0])
    stack.processes = [p for p in stack.processes if p not in matching]
    stack.processes.insert(at, proc)
    _write(stack, root, env_file=False)  # recorded before the wait: `down` finds it even if it hangs
    deadline = time.monotonic() + timeout
    if pool is None:
        health = f"{url}/api/health" if name == "prefect-server" else f"{url}/health"
        _wait_until(service, lambda: _healthy(health), starter, [name], deadline)
    else:
        _wait_until(
            f"{service} heartbeat", lambda: _beat_since(stack, pool, started_at), starter, [name], deadline
        )
    where = f"on {url} again" if pool is None else f"heartbeat seen on pool {pool}"
    return [*lines, f"{name}: started (pid {proc.pid}), {where}; env file unchanged; log {proc.log}"]


def _beat_since(stack: Stack, pool: str, since: float) -> bool:
    """A worker named `<pool>-local` sent the server a heartbeat after `since` (it polls the pool)."""
    for worker in pool_workers(stack.prefect_url, pool) or []:
        age = _heartbeat_age(worker)
        if worker.get("name") == f"{pool}-local" and age is not None and time.time() - age >= since:
            return True
    return False


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
    """(all alive and healthy, one line per process, server and pool), read now. A dead worker counts
    as replaced while another worker of its pool (one `worker` added) is alive."""
    stack = read_stack(home)
    if stack is None:
        return False, [f"no stack recorded under {stack_dir(home)} (make stack-up)"]
    ok, lines = True, []
    live = {proc.name for proc in stack.processes if alive(proc.pid) and _is_ours(proc)}
    for proc in stack.processes:
        pool = _pool_of(proc.name)
        successor = next((n for n in sorted(live) if pool and n != proc.name and _pool_of(n) == pool), None)
        if proc.name in live:
            state = "alive"
        else:
            state = f"dead, replaced by {successor}" if successor else "DEAD"
            ok &= successor is not None
        lines.append(f"{proc.name:15} pid {proc.pid:<8} {state}   log {proc.log}")
    prefect_healthy = False
    for name, url in (
        ("prefect api", f"{stack.prefect_url}/health"),
        ("mlflow", f"{stack.mlflow_url}/health"),
    ):
        healthy = _healthy(url)
        prefect_healthy |= healthy and name == "prefect api"
        ok &= healthy
        lines.append(
            f"{name:15} {url.removesuffix('/health'):40} {'healthy' if healthy else 'NOT RESPONDING'}"
        )
    for pool in POOLS if prefect_healthy else ():
        seen = []
        for worker in pool_workers(stack.prefect_url, pool) or []:
            age = _heartbeat_age(worker)
            beat = f"heartbeat {age:.0f} s ago" if age is not None else "no heartbeat"
            seen.append(f"{worker.get('name')} {str(worker.get('status', '?')).lower()} ({beat})")
        lines.append(f"{'pool ' + pool:15} server sees: {', '.join(seen) or 'no worker'}")
    lines.append(f"{'prefect ui':15} {stack.ui_url}")
    lines.append(f"env: source {stack_dir(home) / 'env'}")
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simpair.ops.local_stack", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=["up", "down", "status", "restart", "worker"])
    parser.add_argument(
        "target",
        nargs="?",
        help=f"restart: one of {', '.join(SERVICES)}; worker: the pool to add one to ({', '.join(POOLS)})",
    )
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
    if args.command == "restart":
        if args.target not in SERVICES:
            parser.error(f"restart needs a service: {', '.join(SERVICES)}")
        try:
            for line in restart(args.home, args.target):
                print(line)
        except StackError as exc:
            print(f"stack restart failed: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "worker":
        if args.target not in POOLS:
            parser.error("worker needs a pool: cpu or gpu")
        try:
            proc = start_worker(args.home, args.target)
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
