"""Which failures are worth retrying.

Retrying a permanent fault (a config naming a backbone that does not exist, a corrupt model) only
delays the failure by the whole backoff; not retrying a transient one (the tracking server restarting,
a flaky network mount) fails a night for nothing. The nightly tasks retry only what this says is
transient.
"""

from __future__ import annotations

import errno

from simpair.registry.tracking import TrackingUnavailable

TRANSIENT_ERRNOS = {
    errno.EIO,
    errno.EAGAIN,
    errno.EBUSY,
    errno.ETIMEDOUT,
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.ENETUNREACH,
    errno.EHOSTUNREACH,
    errno.ESTALE,
}
TRANSIENT_MESSAGES = (
    "connection refused",
    "max retries exceeded",
    "failed to establish a new connection",
    "timed out",
    "temporarily unavailable",
    "database is locked",
    "remote end closed connection",
    "502 bad gateway",
    "503 service unavailable",
    "504 gateway",
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def is_transient(exc: BaseException) -> bool:
    """True for faults that may go away by themselves: connectivity, timeouts, I/O hiccups, locks."""
    for item in _chain(exc):
        if isinstance(item, TrackingUnavailable | ConnectionError | TimeoutError):
            return True
        if isinstance(item, OSError) and item.errno in TRANSIENT_ERRNOS:
            return True
        text = str(item).lower()
        if any(marker in text for marker in TRANSIENT_MESSAGES):
            return True
    return False
