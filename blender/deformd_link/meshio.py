"""meshio.py — Blender meshes and shape keys in and out, as flat float32 arrays.

Everything here goes through foreach_get / foreach_set on `mesh.vertices`, `mesh.loops`,
`mesh.loop_triangles`, the active UV layer and `key_block.data` ("co"), so a 40,000-vertex mesh
moves in milliseconds without numpy. (`ShapeKey.points` does not exist in Blender 3.4: a key's
coordinates are `key_block.data`.)

The vertex identity rule lives here too (blender/README.md, "Vertex identity"): Blender vertex i
is the session's welded (topology) vertex i. render_layout() writes the render vertices of an
upload so that deformd's import keeps that true: render vertex i is Blender vertex i for every
i < len(mesh.vertices), and the extra render vertices that UV seams need come after them, each
at the position of the Blender vertex it copies, so deformd's weld (first render vertex of a
position is its representative, topology vertices numbered in that order) numbers the welded
vertices exactly as Blender does.

DOES NOT talk to the server (link.py does) or draw anything (ui.py).
"""
from array import array

import bpy

SCULPT_KEY = "deformd sculpt"


def floats(n):
    return array("f", bytes(4 * n))


def read_co(items):
    """The "co" of each item of a collection (mesh.vertices, key_block.data), 3 floats each."""
    co = floats(3 * len(items))
    items.foreach_get("co", co)
    return co


def read_vertices(mesh):
    """mesh.vertices' coordinates (object space)."""
    return read_co(mesh.vertices)


def shape_keys(mesh):
    """The mesh's key blocks, or an empty list."""
    key = mesh.shape_keys
    return list(key.key_blocks) if key else []


def basis_key(mesh):
    key = mesh.shape_keys
    return key.reference_key if key else None


def read_key(kb):
    return read_co(kb.data)


def write_key(kb, co):
    kb.data.foreach_set("co", co)


def read_base(mesh):
    """The shape the session's base is: the Basis key's coordinates when the mesh has shape keys
    (Blender evaluates keys against it; mesh.vertices may disagree with it, glTF-Blender-IO
    #1317), else mesh.vertices."""
    b = basis_key(mesh)
    return read_key(b) if b is not None else read_vertices(mesh)


def key_delta(kb):
    """A relative key's delta against its own relative key, the one Blender adds value times."""
    co = read_key(kb)
    rel = read_key(kb.relative_key)
    return array("f", [a - b for a, b in zip(co, rel)])


def add_key(obj, name):
    """A new shape key on obj (a Basis first when it has none), not from the mix."""
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
    return obj.shape_key_add(name=name, from_mix=False)


def set_range(kb, lo, hi):
    """A key's slider range; Blender keeps slider_min below slider_max at every step, so the
    end that moves away from the other goes first."""
    if lo >= kb.slider_max:
        kb.slider_max, kb.slider_min = hi, lo
    else:
        kb.slider_min, kb.slider_max = lo, hi


def find_key(mesh, name):
    key = mesh.shape_keys
    return key.key_blocks.get(name) if key else None


def set_key_from_delta(obj, name, base, delta):
    """Key `name` (made when missing) at base + delta."""
    kb = find_key(obj.data, name) or add_key(obj, name)
    write_key(kb, array("f", [a + b for a, b in zip(base, delta)]))
    obj.data.update()
    return kb


def loose_vertices(mesh):
    """How many vertices no face uses: deformd drops unreferenced vertices on import, which would
    shift every later index, so an upload refuses them."""
    used = bytearray(len(mesh.vertices))
    idx = array("i", bytes(4 * len(mesh.loops)))
    mesh.loops.foreach_get("vertex_index", idx)
    for v in idx:
        used[v] = 1
    return len(used) - sum(used)


def render_layout(mesh):
    """The render vertices and triangles an upload writes: (source, uvs, triangles).

    source[r] is the Blender vertex render vertex r copies; source[i] == i for i < vertex count.
    uvs has 2 floats per render vertex (the active UV layer, V flipped as glTF wants) or is None
    without a UV layer. triangles indexes render vertices, 3 per loop triangle. A vertex takes
    the UV of the first loop that uses it; a loop with another UV gets a render vertex of its
    own after all Blender vertices (one per distinct vertex and UV pair).
    """
    n = len(mesh.vertices)
    mesh.calc_loop_triangles()
    ntri = len(mesh.loop_triangles)
    tri_loops = array("i", bytes(4 * 3 * ntri))
    mesh.loop_triangles.foreach_get("loops", tri_loops)
    loop_vertex = array("i", bytes(4 * len(mesh.loops)))
    mesh.loops.foreach_get("vertex_index", loop_vertex)
    source = array("I", range(n))
    layer = mesh.uv_layers.active
    if layer is None:
        return source, None, array("I", (loop_vertex[l] for l in tri_loops))
    loop_uv = floats(2 * len(mesh.loops))
    layer.data.foreach_get("uv", loop_uv)
    uvs = floats(2 * n)
    seen = bytearray(n)
    extra = {}
    render_of_loop = array("I", bytes(4 * len(mesh.loops)))
    for l, v in enumerate(loop_vertex):
        u, w = loop_uv[2 * l], loop_uv[2 * l + 1]
        if not seen[v]:
            seen[v] = 1
            uvs[2 * v], uvs[2 * v + 1] = u, w
            render_of_loop[l] = v
        elif uvs[2 * v] == u and uvs[2 * v + 1] == w:
            render_of_loop[l] = v
        else:
            r = extra.get((v, u, w))
            if r is None:
                r = extra[(v, u, w)] = len(source)
                source.append(v)
                uvs.append(u)
                uvs.append(w)
            render_of_loop[l] = r
    for i in range(1, len(uvs), 2):
        uvs[i] = 1.0 - uvs[i]
    return source, uvs, array("I", (render_of_loop[l] for l in tri_loops))


def gather(values, source, width=3, first_identity=True):
    """out[i] = values[source[i]], `width` floats an entry. With first_identity the caller
    promises source[i] == i below len(values) / width (an upload's render layout), and those
    are copied at once."""
    out = floats(width * len(source))
    n = min(len(values) // width, len(source)) if first_identity else 0
    out[: width * n] = values[: width * n]
    for r in range(n, len(source)):
        s = source[r]
        out[width * r : width * r + width] = values[width * s : width * s + width]
    return out


def new_mesh_object(context, name, positions, triangles, corner_uvs=None):
    """A new object (in the scene's active collection) with a mesh of these vertices and
    triangles, vertex i at positions[3i:3i+3], and a UV layer from corner_uvs (2 floats per
    triangle corner, as deformd keeps them: assimp turned the glTF V back into Blender's) when
    given."""
    mesh = bpy.data.meshes.new(name)
    n = len(positions) // 3
    t = len(triangles) // 3
    mesh.vertices.add(n)
    mesh.vertices.foreach_set("co", positions)
    mesh.loops.add(3 * t)
    mesh.loops.foreach_set("vertex_index", triangles)
    mesh.polygons.add(t)
    mesh.polygons.foreach_set("loop_start", array("i", range(0, 3 * t, 3)))
    mesh.polygons.foreach_set("loop_total", array("i", [3]) * t)
    if corner_uvs is not None:
        mesh.uv_layers.new(name="UVMap").data.foreach_set("uv", corner_uvs)
    mesh.update(calc_edges=True)
    obj = bpy.data.objects.new(name, mesh)
    context.collection.objects.link(obj)
    return obj
