"""Server-Sent Events: encoding for the downstream stream and an incremental parser for upstream ones."""

from __future__ import annotations

from dataclasses import dataclass

#: The largest event the parser buffers unless told otherwise (its data lines, or one unfinished
#: line); a backend sending more is broken or hostile.
MAX_EVENT = 16 * 1024 * 1024


class EventTooLarge(ValueError):
    """An event (or one line of it) is larger than the parser's `max_event`."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    data: bytes
    event: str = "message"
    id: str | None = None
    retry: int | None = None


def encode_event(event: SseEvent) -> bytes:
    parts: list[bytes] = []
    if event.id is not None:
        parts.append(b"id: " + event.id.encode())
    if event.retry is not None:
        parts.append(b"retry: %d" % event.retry)
    if event.event != "message":
        parts.append(b"event: " + event.event.encode())
    if event.data or not parts:
        parts.extend(b"data: " + line for line in event.data.split(b"\n"))
    else:
        parts.append(b"data: ")
    return b"\n".join(parts) + b"\n\n"


class SseParser:
    """Feed bytes, get complete events. Follows the WHATWG rules that matter here: fields `data`,
    `event`, `id`, `retry`; comment lines are ignored; an event is dispatched on a blank line."""

    def __init__(self, max_event: int = MAX_EVENT) -> None:
        self._max_event = max_event
        self._size = 0  # the data of the event being read so far
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._has_fields = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Complete events in what has arrived so far. Lines end with CRLF, LF or a lone CR; a CR
        at the very end of a chunk waits for the next one (it may be half of a CRLF)."""
        data = self._buffer + chunk
        hold = b"\r" if data.endswith(b"\r") else b""
        if hold:
            data = data[:-1]
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._buffer = lines.pop() + hold  # the unfinished last line
        if len(self._buffer) > self._max_event:
            raise EventTooLarge(f"an event over {self._max_event:,} bytes, the gateway's limit")
        events: list[SseEvent] = []
        for line in lines:
            if not line:
                if self._has_fields:
                    events.append(
                        SseEvent(b"\n".join(self._data), self._event or "message", self._id, self._retry)
                    )
                self._data, self._event, self._id, self._retry, self._has_fields = [], "", None, None, False
                self._size = 0
                continue
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            self._has_fields = True
            if name == b"data":
                self._size += len(value) + (1 if self._data else 0)  # the line break joining them
                if self._size > self._max_event:
                    raise EventTooLarge(f"an event over {self._max_event:,} bytes, the gateway's limit")
                self._data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            elif name == b"id":
                self._id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit():
                self._retry = int(value)
        return events
