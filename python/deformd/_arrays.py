"""numpy when it is there, array('f') when not: what positions and offsets are returned as."""
from array import array
from typing import Any, Optional

try:  # the optional extra: deformd[numpy], Debian's python3-numpy
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None

numpy: Optional[Any] = _np


def have_numpy() -> bool:
    return numpy is not None


def vec3(a: array, use_numpy: Optional[bool] = None) -> Any:
    """A flat array('f') of 3 floats per vertex as numpy float32 (n, 3) when numpy is there (or
    use_numpy is True), else the array('f') itself."""
    if use_numpy is None:
        use_numpy = numpy is not None
    if use_numpy:
        if numpy is None:
            raise RuntimeError("numpy is not installed: install python3-numpy or pass use_numpy=False")
        return numpy.frombuffer(a.tobytes(), dtype="<f4").reshape(-1, 3).copy()
    return a


def flat_f32(values: Any) -> array:
    """Any (n, 3) or flat sequence of floats (numpy arrays included) as a flat array('f')."""
    if numpy is not None and isinstance(values, numpy.ndarray):
        return array("f", numpy.ascontiguousarray(values, dtype="<f4").reshape(-1).tobytes())
    if isinstance(values, array) and values.typecode == "f":
        return values
    out = array("f")
    for v in values:
        if isinstance(v, (int, float)):
            out.append(v)
        else:
            out.extend(v)
    return out
