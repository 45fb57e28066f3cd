"""The crash automation's silence window: 55 s by default, shorter through the environment, never
below one heartbeat (30 s) plus 5 s of slack, so a test or a quiet cluster retries a stopped worker's
run sooner without risking healthy runs."""

from __future__ import annotations

import pytest

from simpair.ops.pool_dispatch import (
    CRASH_MESSAGE,
    SILENT_AFTER_SECONDS,
    SILENT_ENV,
    crash_detection_automation,
    crash_message,
)


def test_the_silence_window_comes_from_the_environment_and_names_itself_in_the_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SILENT_ENV, raising=False)
    default = crash_detection_automation()
    assert default.trigger.within.total_seconds() == SILENT_AFTER_SECONDS == 55
    assert default.actions[0].message == CRASH_MESSAGE == crash_message(55)

    monkeypatch.setenv(SILENT_ENV, "40")
    shorter = crash_detection_automation()
    assert shorter.trigger.within.total_seconds() == 40
    assert shorter.actions[0].message.startswith("no flow-run heartbeat for 40 s:")


@pytest.mark.parametrize(("value", "why"), [("30", "at least 35 s"), ("soon", "expected whole seconds")])
def test_a_window_shorter_than_a_heartbeat_or_not_a_number_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    monkeypatch.setenv(SILENT_ENV, value)
    with pytest.raises(ValueError, match=f"{SILENT_ENV}=.*{why}"):
        crash_detection_automation()
