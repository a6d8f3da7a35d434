"""Connection settings shared by both clients: addresses, TLS, token and author defaults."""
import getpass
import os
import ssl
from typing import Optional, Tuple, Union

RPC_PORT = 7451
STREAM_PORT = 7450

TLS = Union[None, bool, str, ssl.SSLContext]


def tls_context(tls: TLS) -> Optional[ssl.SSLContext]:
    """None/False: plain TCP. True: TLS verified against the system's CAs. A string: TLS verified
    against that CA file (as `deformctl --tls --tls-ca FILE`). An SSLContext: used as it is."""
    if tls is None or tls is False:
        return None
    if tls is True:
        return ssl.create_default_context()
    if isinstance(tls, str):
        return ssl.create_default_context(cafile=tls)
    if isinstance(tls, ssl.SSLContext):
        return tls
    raise TypeError("tls must be None, a bool, a CA file path or an ssl.SSLContext")


def default_token(token: Optional[str]) -> Optional[str]:
    """The token given, else $DEFORMD_TOKEN (as deformctl), else none."""
    if token is not None:
        return token
    return os.environ.get("DEFORMD_TOKEN") or None


def default_author(author: Optional[str]) -> Optional[str]:
    """The author given, else $DEFORMD_AUTHOR, else the login name — deformctl's order, so that
    `deformctl undo` undoes what a script did. An empty string sends no hello."""
    if author is not None:
        return author or None
    env = os.environ.get("DEFORMD_AUTHOR") or os.environ.get("USER")
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # no login name: the server names the connection anonymous-N
        return None


def parse_address(text: str, default_port: int) -> Tuple[str, int]:
    """HOST:PORT, :PORT, [v6addr]:PORT or HOST (deformctl's forms)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    return host or "localhost", int(port) if port else default_port


def address(host: Optional[str], port: Optional[int], env: str, default_port: int) -> Tuple[str, int]:
    """The address to use: what was given, else $DEFORMD_RPC / $DEFORMD_STREAM (as deformctl),
    else localhost and the default port."""
    if host is not None and port is not None:
        return host, port
    e = os.environ.get(env)
    eh, ep = parse_address(e, default_port) if e else ("localhost", default_port)
    return (host if host is not None else eh), (port if port is not None else ep)
