"""glb.py — a binary glTF 2.0 file of one triangle mesh with morph targets, in pure Python.

The add-on writes the file itself rather than through Blender's glTF exporter, which re-splits
and reorders vertices between exports (glTF-Blender-IO #2633): here render vertex r is exactly
what the caller put at r, so the vertex identity rule of meshio.render_layout() holds.

What deformd's importer (assimp) reads from it: POSITION, TEXCOORD_0 when given, the triangle
indices, one morph target per shape key (POSITION deltas, dense), the targets' names in
mesh.extras.targetNames and their default weights in mesh.weights. No normals: deformd computes
its own. One node, no transform: the coordinates are the object's local ones.

DOES NOT know Blender (meshio.py reads the mesh) or the server (link.py uploads the bytes).
"""
import json
import struct
import sys
from array import array


def _bounds(values):
    lo = [min(values[k::3]) for k in range(3)] if values else [0.0, 0.0, 0.0]
    hi = [max(values[k::3]) for k in range(3)] if values else [0.0, 0.0, 0.0]
    # The accessor bounds must hold every float32 value: write them as the floats themselves.
    return [float(x) for x in array("f", lo)], [float(x) for x in array("f", hi)]


def _le(a):
    if sys.byteorder == "little":
        return a.tobytes()
    b = array(a.typecode, a)
    b.byteswap()
    return b.tobytes()


def write(name, positions, triangles, uvs=None, targets=(), weights=()):
    """The GLB bytes. positions: array('f'), 3 per render vertex; triangles: array('I'), 3 per
    triangle; uvs: array('f'), 2 per render vertex, or None; targets: [(name, deltas)] with deltas
    an array('f') like positions; weights: the targets' default weights."""
    n = len(positions) // 3
    chunks, views, accessors = [], [], []

    def add(data, target=None):
        offset = sum(len(c) for c in chunks)
        chunks.append(data + b"\0" * (-len(data) % 4))
        view = {"buffer": 0, "byteOffset": offset, "byteLength": len(data)}
        if target is not None:
            view["target"] = target
        views.append(view)
        return len(views) - 1

    def accessor(data, ctype, count, kind, bounds=None, target=None):
        a = {"bufferView": add(data, target), "componentType": ctype, "count": count, "type": kind}
        if bounds:
            a["min"], a["max"] = bounds
        accessors.append(a)
        return len(accessors) - 1

    FLOAT, UINT = 5126, 5125
    attributes = {"POSITION": accessor(_le(positions), FLOAT, n, "VEC3", _bounds(positions), 34962)}
    if uvs is not None:
        attributes["TEXCOORD_0"] = accessor(_le(uvs), FLOAT, n, "VEC2", None, 34962)
    indices = accessor(_le(triangles), UINT, len(triangles), "SCALAR", None, 34963)
    primitive = {"attributes": attributes, "indices": indices, "mode": 4}
    gmesh = {"name": name, "primitives": [primitive]}
    if targets:
        primitive["targets"] = [
            {"POSITION": accessor(_le(d), FLOAT, n, "VEC3", _bounds(d), 34962)} for _, d in targets
        ]
        gmesh["weights"] = [float(w) for w in weights]
        gmesh["extras"] = {"targetNames": [t for t, _ in targets]}
    binary = b"".join(chunks)
    doc = {
        "asset": {"version": "2.0", "generator": "deformd Blender link"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"name": name, "mesh": 0}],
        "meshes": [gmesh],
        "buffers": [{"byteLength": len(binary)}],
        "bufferViews": views,
        "accessors": accessors,
    }
    text = json.dumps(doc, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 4)
    total = 12 + 8 + len(text) + 8 + len(binary)
    return b"".join([
        struct.pack("<III", 0x46546C67, 2, total),
        struct.pack("<II", len(text), 0x4E4F534A), text,
        struct.pack("<II", len(binary), 0x004E4942), binary,
    ])
