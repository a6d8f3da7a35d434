"""Exceptions raised by the deformd client."""
from typing import Any, Optional


class DeformdError(Exception):
    """The base of every error this package raises."""


class RpcError(DeformdError):
    """A JSON-RPC error answer: `code` (docs/json-api.md §5), `message`, and `data` when the
    server sent one (deformd sends none today). Branch on `code`, never on the message."""

    def __init__(self, code: int, message: str, data: Optional[Any] = None, method: Optional[str] = None):
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data
        self.method = method

    def __str__(self) -> str:
        where = f"{self.method}: " if self.method else ""
        return f"{where}error {self.code}: {self.message}"


class ConnectionClosed(DeformdError):
    """The connection closed (or failed) before the answer came, or could not be made (the
    server is not running, or not at that address). The next call connects again."""


class ProtocolError(DeformdError):
    """The binary stream carried something the decoder refuses; `code` is the C codec's
    PROTO_E* number where the decoder knows one (protocol/proto.h)."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


class StreamError(DeformdError):
    """The server sent an ERROR frame on the stream port (code and message from protocol.md §5)."""

    def __init__(self, code: int, message: str):
        super().__init__(f"stream error {code}: {message}")
        self.code = code
        self.message = message
