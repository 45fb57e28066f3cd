"""Calls to a real Prefect server's REST API, shared by the real-stack tests."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any


def prefect_api(url: str, path: str, body: dict[str, Any] | None = None, method: str | None = None) -> Any:
    """One call to the Prefect server's REST API (GET, or POST with a body unless `method` says
    otherwise), retried like Prefect's own client on 429/502/503 (the SQLite-backed server answers
    503 while its database is busy)."""
    request = urllib.request.Request(
        f"{url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method=method or ("GET" if body is None else "POST"),
    )
    # a read may be asked again after a timeout (a loaded machine stalls SQLite for tens of seconds);
    # a write may not: it could have happened
    reading = request.method == "GET" or path.endswith("/filter")
    for attempt in range(10):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 502, 503) or attempt == 9:
                raise
            time.sleep(1 + attempt)
        except (TimeoutError, urllib.error.URLError):
            if not reading or attempt >= 3:
                raise
            time.sleep(1 + attempt)
