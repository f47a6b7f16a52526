from email.message import EmailMessage

import pytest

from apps.gateway.transports.twisted_tuning import fast_content_type


def _email_answer(line: bytes) -> bytes:
    message = EmailMessage()
    message["content-type"] = line.decode("charmap")
    return message.get_content_type().encode("charmap")


@pytest.mark.parametrize(
    "line",
    [
        b"application/json",
        b"Application/JSON; charset=utf-8",
        b"multipart/form-data; boundary=xyz",
        b"application/x-www-form-urlencoded",
        b"  text/event-stream ",
        b"garbage",
        b"",
        b"/json",
        b"application/",
        b"x/y/z",
        b"a b/c",
        b"text/plain ;a=b",
    ],
)
def test_same_answer_as_the_email_package(line: bytes) -> None:
    assert fast_content_type(line) == _email_answer(line)


def test_twisted_writes_no_per_request_log_line_unless_asked(tmp_path: object) -> None:
    from unittest import mock

    from twisted.web import http

    from apps.gateway.transports.twisted_tuning import install

    install()
    install()  # idempotent
    factory = http.HTTPFactory()
    factory._logFile = mock.Mock()
    factory.log(mock.Mock())
    factory._logFile.write.assert_not_called()
    factory.logPath = str(tmp_path)  # type: ignore[assignment]
    with mock.patch.object(factory, "_logFormatter", return_value="line"):
        factory._logDateTime = "now"
        factory.log(mock.Mock())
    factory._logFile.write.assert_called_once_with("line\n")
