"""deformd — a Python client for the deformd mesh deformation service.

    import deformd
    with deformd.Client(port=7451) as c:
        c.weights_set("demo", weights={"smile_L": 0.8})

deformd.Client is blocking (thread-safe; calls pipeline), deformd.aio.Client is the asyncio
client with the same methods. See python/README.md and docs/json-api.md."""
from . import aio
from .client import Client
from .errors import ConnectionClosed, DeformdError, ProtocolError, RpcError, StreamError

__all__ = ["Client", "aio", "RpcError", "DeformdError", "ConnectionClosed", "ProtocolError", "StreamError"]
__version__ = "0.1.0"
