"""Connection settings shared by both clients: addresses, TLS, token and author defaults."""
import getpass
import os
import ssl
from typing import Optional, Union

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
