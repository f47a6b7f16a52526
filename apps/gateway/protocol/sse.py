"""Server-Sent Events: encoding for the downstream stream and an incremental parser for upstream ones."""

from __future__ import annotations

from dataclasses import dataclass

#: The longest unfinished line the parser buffers; a backend sending more without a line break
#: is broken or hostile.
_MAX_PENDING = 16 * 1024 * 1024


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

    def __init__(self) -> None:
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
        if len(data) > _MAX_PENDING:
            raise ValueError(f"an SSE line longer than {_MAX_PENDING} bytes")
        hold = b"\r" if data.endswith(b"\r") else b""
        if hold:
            data = data[:-1]
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._buffer = lines.pop() + hold  # the unfinished last line
        events: list[SseEvent] = []
        for line in lines:
            if not line:
                if self._has_fields:
                    events.append(
                        SseEvent(b"\n".join(self._data), self._event or "message", self._id, self._retry)
                    )
                self._data, self._event, self._id, self._retry, self._has_fields = [], "", None, None, False
                continue
            if line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            self._has_fields = True
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
            elif name == b"id":
                self._id = value.decode("utf-8", "replace")
            elif name == b"retry" and value.isdigit():
                self._retry = int(value)
        return events
