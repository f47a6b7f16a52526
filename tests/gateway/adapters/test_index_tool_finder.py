"""The tool index as the gateway's `ToolFinder` (apps/gateway/adapters/index_tool_finder.py): getting ready ahead of
the first search."""

from __future__ import annotations

import threading

from apps.gateway.adapters import index_tool_finder as tool_finder


def test_prepare_loads_the_model_once_on_a_thread_of_its_own(monkeypatch) -> None:  # noqa: ANN001
    warmed: list[str] = []
    started: list[threading.Thread] = []

    class Recorded(threading.Thread):
        def start(self) -> None:
            started.append(self)
            super().start()

    monkeypatch.setattr(tool_finder, "_warm", lambda: warmed.append(threading.current_thread().name))
    monkeypatch.setattr(tool_finder.threading, "Thread", Recorded)
    finder = tool_finder.IndexFinder()
    finder.prepare()
    finder.prepare()
    assert len(started) == 1
    started[0].join(10)
    assert warmed == ["tool-search-warm-up"]


def test_a_model_that_fails_to_load_ahead_is_logged_not_raised(monkeypatch, caplog) -> None:  # noqa: ANN001
    def broken() -> None:
        raise RuntimeError("no model here")

    monkeypatch.setattr(tool_finder, "embedder", broken)
    tool_finder._warm()
    assert "could not be loaded ahead of a search" in caplog.text
