"""Calls to a real Prefect server's REST API, shared by the real-stack tests."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any


def prefect_api(url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One call to the Prefect server's REST API, retried like Prefect's own client on 429/502/503
    (the SQLite-backed server answers 503 while its database is busy)."""
    request = urllib.request.Request(
        f"{url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="GET" if body is None else "POST",
    )
    for attempt in range(10):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 502, 503) or attempt == 9:
                raise
            time.sleep(1 + attempt)
