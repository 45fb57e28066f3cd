#!/usr/bin/env bash
# Start an MLflow tracking server for simpair: SQLite backend store + a local artifact folder that the
# server proxies (clients upload/download artifacts over HTTP, so they need no shared filesystem).
#
#   mlflow/serve.sh                      # http://127.0.0.1:5000, store in mlflow/store/ (gitignored)
#   MLFLOW_PORT=5500 MLFLOW_STORE=/srv/mlflow mlflow/serve.sh
#   export MLFLOW_TRACKING_URI=http://127.0.0.1:5000   # then any simpair command logs there
#
# For a team (Postgres + object store) see infra/README.md. This folder must never get an
# __init__.py: it would shadow the `mlflow` library.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
host="${MLFLOW_HOST:-127.0.0.1}"
port="${MLFLOW_PORT:-5000}"
store="${MLFLOW_STORE:-$here/store}"
workers="${MLFLOW_WORKERS:-1}"
mlflow_bin="${MLFLOW_BIN:-$(command -v mlflow || echo "$here/../.venv/bin/mlflow")}"

# MLflow 3 answers 403 to a Host header it does not know (default: localhost and private IPs). Serving
# other machines by name: MLFLOW_ALLOWED_HOSTS="mlhost,mlhost:5000,localhost,localhost:*" (the list
# replaces the defaults).
allowed=()
if [[ -n "${MLFLOW_ALLOWED_HOSTS:-}" ]]; then
  allowed=(--allowed-hosts "$MLFLOW_ALLOWED_HOSTS")
fi

mkdir -p "$store/artifacts"
echo "MLflow tracking server on http://$host:$port (backend sqlite:///$store/mlflow.db, artifacts $store/artifacts)"
exec "$mlflow_bin" server \
  --host "$host" \
  --port "$port" \
  --workers "$workers" \
  --backend-store-uri "sqlite:///$store/mlflow.db" \
  --artifacts-destination "$store/artifacts" \
  "${allowed[@]}"
