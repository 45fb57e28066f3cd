"""Read a Prefect artifact back the way a person would find it: the newest one with a key."""

from __future__ import annotations


def newest_artifact(key: str) -> str:
    """Markdown of the newest Prefect artifact with this key (via the REST API: Prefect 3.8's client
    helpers send null paging fields that this server version rejects)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        response = client.request(
            "POST",
            "/artifacts/filter",
            json={"artifacts": {"key": {"any_": [key]}}, "limit": 1, "offset": 0, "sort": "CREATED_DESC"},
        )
    found = response.json()
    assert found, f"no Prefect artifact {key!r}"
    return str(found[0]["data"])
