"""tests/blender/test_link.py — the Blender add-on against a live deformd, headless.

Run by tests/blender/run.sh inside `blender -b --factory-startup --python-exit-code 1 --python
tests/blender/test_link.py -- BUILD_DIR SOURCE_DIR` (one ctest test). It starts its own
deformd (a data directory in a temporary folder, ports 0) and drives it with deformctl, which
is the independent side of every check: what the add-on sends is read back with deformctl
(weights.get, targets.list, sculpt.get, mesh.info, a downloaded OBJ of the current shape), and
what deformctl changes must reach the shape keys. Blender's own evaluation of the shape keys
(the evaluated mesh) is compared with the server's shape, so neither side's arithmetic is the
add-on's. bpy.app.timers do not run under -b: the test calls deformd_link.drain_all(), which
is what the timer calls.

Checks, in order: upload of a UV sphere with shape keys and seams (counts, names, values,
ranges; welded vertex i is Blender vertex i: count and order); the session opened again as a
new object (the same vertices in the same order, keys, UVs); a key value and mute set in
Blender reach the session; a weights.set from deformctl reaches the key; a server brush stroke
is pulled as the "deformd sculpt" key equal to base + the server's offsets within float32; a
sculpt edit pushed on leaving Sculpt mode and by the button reaches the session on every render
copy of the vertices; a new shape key becomes a target; a target made on the server becomes a
key; a restarted server is reconnected to; a moved Basis and a changed vertex count pause the
link with a message, and undoing them resumes it; Link to session links the object again; loading
another file ends the links.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from array import array

import bmesh
import bpy

ARGS = sys.argv[sys.argv.index("--") + 1:]
BUILD, SOURCE = ARGS[0], ARGS[1]
TMP = tempfile.mkdtemp(prefix="deformd-blender-")
sys.path.insert(0, os.path.join(SOURCE, "blender"))

import addon_utils  # noqa: E402


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg.split(":")[0] if ":" in msg else msg, flush=True)


SERVERS = []  # stopped at the end, also when a check fails


class Server:
    """deformd on a data directory of its own; restart() keeps the data and the ports."""

    def __init__(self):
        self.data = os.path.join(TMP, "data")
        os.makedirs(self.data, exist_ok=True)
        self.rpc = self.stream = 0
        self.start()

    def start(self):
        SERVERS.append(self)
        self.log = open(os.path.join(TMP, f"deformd-{time.time_ns()}.log"), "w")
        self.p = subprocess.Popen([os.path.join(BUILD, "bin", "deformd"), "--data", self.data, "--stream-port",
                                   str(self.stream), "--rpc-port", str(self.rpc), "--http-port", "off",
                                   "--log-level", "warn"], stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.p.stdout.readline()
        ports = dict(kv.split("=") for kv in line.split())
        if "rpc_port" not in ports:
            fail(f"deformd printed {line!r}")
        self.stream, self.rpc = int(ports["stream_port"]), int(ports["rpc_port"])

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        if self.p.wait(timeout=30) != 0:
            fail(f"deformd exited with {self.p.returncode}; log {self.log.name}")

    def ctl(self, *args):
        r = subprocess.run([os.path.join(BUILD, "bin", "deformctl"), "--rpc", f"127.0.0.1:{self.rpc}", "--stream",
                            f"127.0.0.1:{self.stream}", *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"deformctl {' '.join(args)}: {r.stdout} {r.stderr}")
        return json.loads(r.stdout) if r.stdout.strip().startswith(("{", "[")) else r.stdout

    def call(self, method, **params):
        return self.ctl("call", method, json.dumps(params))

    def shape(self, session):
        """The session's current shape from a downloaded OBJ: a flat list, 3 floats a vertex."""
        path = os.path.join(TMP, "shape.obj")
        self.ctl("download", session, path)
        out = []
        with open(path) as fh:
            for line in fh:
                if line.startswith("v "):
                    out.extend(float(x) for x in line.split()[1:4])
        return out


def evaluated(obj):
    """Blender's own mix of the shape keys: the evaluated mesh's vertices, object space."""
    bpy.context.view_layer.update()
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = array("f", bytes(12 * len(me.vertices)))
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    return co


def key_co(kb):
    co = array("f", bytes(12 * len(kb.data)))
    kb.data.foreach_get("co", co)
    return co


def max_diff(a, b, n):
    return max(abs(a[i] - b[i]) for i in range(n))


def refusal(f):
    """The error an operator reports (under -b, bpy.ops raises it as a RuntimeError)."""
    try:
        r = f()
    except RuntimeError as e:
        return str(e)
    fail(f"no error reported ({r})")


def until(cond, what, drain, seconds=20.0):
    """Drains the links until cond() holds; fails after `seconds` (a bound, not a timing)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        drain()
        if cond():
            return
        time.sleep(0.02)
    fail(f"{what}: not within {seconds} s; the links: " + "; ".join(f"{l.status} {l.error} version {l.version} replica {l.replica.version} {l.replica.error!r}" for l in __import__("deformd_link").link.LINKS.values()))


def main():
    def raise_error(e):
        raise e

    mod = addon_utils.enable("deformd_link", default_set=True, handle_error=raise_error)
    check(mod is not None and hasattr(bpy.types, "DEFORMD_OT_upload") and hasattr(bpy.types, "VIEW3D_PT_deformd"),
          "the add-on registers its operators and panel")
    from deformd_link import link, meshio

    drain = mod.drain_all
    srv = Server()
    prefs = bpy.context.preferences.addons["deformd_link"].preferences
    prefs.host, prefs.port, prefs.stream_port = "127.0.0.1", srv.rpc, srv.stream

    # A UV sphere (seams: more render vertices than Blender vertices), moved and scaled so that
    # object space and world space differ, with two keys.
    for o in list(bpy.data.objects):
        bpy.data.objects.remove(o)
    bpy.ops.mesh.primitive_uv_sphere_add(segments=24, ring_count=12, radius=1.0, location=(5, 0, 0))
    obj = bpy.context.active_object
    obj.scale = (2, 2, 2)
    mesh = obj.data
    n = len(mesh.vertices)
    obj.shape_key_add(name="Basis", from_mix=False)
    base = key_co(mesh.shape_keys.reference_key)
    raise_ = obj.shape_key_add(name="raise", from_mix=False)
    co = array("f", base)
    for i in range(2, 3 * n, 3):
        co[i] += 0.3 if co[i] > 0 else 0.0
    raise_.data.foreach_set("co", co)
    raise_.value = 0.25
    squash = obj.shape_key_add(name="squash", from_mix=False)
    co = array("f", base)
    for i in range(0, 3 * n, 3):
        co[i] *= 0.6
    squash.data.foreach_set("co", co)
    squash.slider_min, squash.slider_max, squash.value = -1.0, 2.0, 0.5

    # ---- upload -----------------------------------------------------------------------------
    r = bpy.ops.deformd.upload(session="ball")
    check(r == {"FINISHED"}, f"the upload operator finishes: {r}")
    L = link.LINKS[obj.name]
    info = srv.ctl("mesh.info", "ball")
    source = meshio.render_layout(mesh)[0]
    check(info["topology_vertices"] == n and info["vertices"] == len(source) > n,
          f"the session has the mesh's {n} welded vertices and its seam copies: {info}")
    check(info["targets"] == ["raise", "squash"] and info["up"] == "z", f"the keys are the targets, Z up: {info}")
    t = {x["name"]: x for x in srv.ctl("targets.list", "ball")}
    check(t["raise"]["value"] == 0.25 and t["squash"]["value"] == 0.5 and t["squash"]["min"] == -1
          and t["squash"]["max"] == 2, f"key values are weights, slider ranges are ranges: {t}")
    shape = srv.shape("ball")
    ev = evaluated(obj)
    check(len(shape) == 3 * len(source) and max_diff(shape, ev, 3 * n) < 1e-6,
          f"render vertex i is Blender vertex i, in object space: {max_diff(shape, ev, 3 * n)}")
    check(all(shape[3 * r + k] == shape[3 * source[r] + k] for r in range(n, len(source)) for k in range(3)),
          "each seam copy is at its vertex")
    welded = L.read_welded("current")
    check(len(welded) == 3 * n and max_diff(welded, ev, 3 * n) < 1e-6,
          f"the welded positions the link reads are Blender's vertices in order: {len(welded) // 3}")

    # ---- meshes an upload refuses, with what to do, leaving no session behind ----------------
    bpy.ops.mesh.primitive_plane_add()
    plane = bpy.context.active_object
    plane.data.vertices.add(1)  # a vertex no face uses
    why = refusal(lambda: bpy.ops.deformd.upload(session="loose"))
    check(plane.name not in link.LINKS and "1 vertices belong to no face" in why and "Delete Loose" in why,
          f"a mesh with a loose vertex is not uploaded, and the refusal says what to do: {why}")
    bpy.ops.mesh.primitive_plane_add(location=(0, 0, 0))
    twin = bpy.context.active_object
    twin.data.vertices.add(3)  # a second triangle on three of the plane's corners: they weld
    co = array("f", bytes(12 * 7))
    twin.data.vertices.foreach_get("co", co)
    co[12:21] = co[0:9]
    twin.data.vertices.foreach_set("co", co)
    twin.data.loops.add(3)
    idx = array("i", bytes(4 * len(twin.data.loops)))
    twin.data.loops.foreach_get("vertex_index", idx)
    idx[-3:] = array("i", [4, 5, 6])
    twin.data.loops.foreach_set("vertex_index", idx)
    twin.data.polygons.add(1)
    twin.data.polygons[-1].loop_start, twin.data.polygons[-1].loop_total = len(idx) - 3, 3
    twin.data.update(calc_edges=True)
    why = refusal(lambda: bpy.ops.deformd.upload(session="twin"))
    sessions = [x["session"] for x in srv.ctl("session.list")]
    check(sessions == ["ball"] and "4 welded vertices where 'Plane.001' has 7" in why and "Merge by Distance" in why,
          f"a mesh whose vertices share a position is refused, says why, and its session is closed: {sessions} {why}")
    for o in (plane, twin):
        bpy.data.objects.remove(o)
    bpy.context.view_layer.objects.active = obj

    # ---- the session opened into Blender: the same vertices, in the same order ----------------
    loops = {}
    uvl = mesh.uv_layers.active.data
    for lp in mesh.loops:
        loops.setdefault(lp.vertex_index, set()).add(tuple(uvl[lp.index].uv))
    r = bpy.ops.deformd.open(session="ball")
    check(r == {"FINISHED"}, f"the open operator finishes: {r}")
    opened = bpy.context.active_object
    om = opened.data
    check(opened != obj and len(om.vertices) == n and key_co(om.shape_keys.reference_key) == base,
          "the opened mesh has the welded vertices, in Blender's order, at the Basis positions exactly")
    check([k.name for k in om.shape_keys.key_blocks] == ["Basis", "raise", "squash", meshio.SCULPT_KEY] and
          om.shape_keys.key_blocks["raise"].value == 0.25 and om.shape_keys.key_blocks["squash"].slider_min == -1,
          "the opened mesh has a key per target, at its value and range")
    check(max_diff(evaluated(opened), evaluated(obj), 3 * n) < 1e-6, "the opened mesh's mix is the uploaded one's")
    ouv = om.uv_layers.active.data
    check(len(om.polygons) == len(mesh.loop_triangles) and
          all(any(abs(u - a) + abs(v - b) < 1e-6 for a, b in loops[lp.vertex_index])
              for lp in om.loops for u, v in [tuple(ouv[lp.index].uv)]),
          "the opened mesh's triangles carry the uploaded UVs")
    bpy.ops.deformd.unlink()
    check(opened.name not in link.LINKS, "Unlink stops the opened object's link")
    bpy.context.view_layer.objects.active = obj

    # ---- weights both ways --------------------------------------------------------------------
    raise_.value = 0.75
    drain()
    w = srv.ctl("weights.get", "ball")["weights"]
    check(w["raise"] == 0.75, f"a key value set in Blender is the session's weight: {w}")
    squash.mute = True
    drain()
    t = {x["name"]: x for x in srv.ctl("targets.list", "ball")}
    check(t["squash"]["muted"] is True and t["squash"]["weight"] == 0, f"a muted key mutes the target: {t}")
    squash.mute = False
    drain()
    srv.ctl("weights.set", "ball", "squash=1.5")
    until(lambda: squash.value == 1.5, "a weights.set from deformctl reaches the key", drain)
    check(raise_.value == 0.75 and not squash.mute, "a weights.set from deformctl sets the key value")

    # ---- a server sculpt pulled as a key ------------------------------------------------------
    v = srv.call("brush.stroke", session="ball", brush="draw", radius=0.6, strength=0.8,
                 samples=[{"center": [0, 0, 1]}, {"center": [0.4, 0, 0.9]}])["version"]
    until(lambda: L.version >= v and not L.want_sculpt and meshio.find_key(mesh, meshio.SCULPT_KEY) is not None,
          "the stroke reaches Blender", drain)
    sk = meshio.find_key(mesh, meshio.SCULPT_KEY)
    offsets = srv.ctl("sculpt.get", "ball")["offsets"]
    moved = [int(k) for k in offsets if int(k) < n]
    sco = key_co(sk)
    exp = array("f", base)
    for i in moved:
        for k in range(3):
            exp[3 * i + k] = base[3 * i + k] + offsets[str(i)][k]
    # Within float32: a few units in the last place of coordinates below 2 (the offsets are
    # (float)q × quantum, summed with the base in float32 on one side and double on the other).
    check(len(moved) > 10 and max_diff(sco, exp, 3 * n) <= 4 * 2.0 ** -23,
          f"the sculpt key is base + the server's offsets within float32 ({len(moved)} vertices moved): "
          f"{max_diff(sco, exp, 3 * n)}")
    check(max_diff(srv.shape("ball"), evaluated(obj), 3 * n) < 1e-5, "Blender's mix is the server's shape")

    # ---- a Blender sculpt pushed --------------------------------------------------------------
    obj.active_shape_key_index = list(mesh.shape_keys.key_blocks).index(sk)
    bpy.ops.object.mode_set(mode="SCULPT")
    drain()
    seam = sorted({source[r] for r in range(n, len(source))})
    edit = [seam[0], seam[len(seam) // 2], n // 2]
    sco = key_co(sk)
    for i in edit:
        sco[3 * i + 1] += 0.05
    sk.data.foreach_set("co", sco)
    bpy.ops.object.mode_set(mode="OBJECT")
    drain()
    offsets = srv.ctl("sculpt.get", "ball")["offsets"]
    q = srv.ctl("state.get", "ball")["offset_quantum"]
    for i in edit:
        want = [sco[3 * i + k] - base[3 * i + k] for k in range(3)]
        copies = [r for r in range(len(source)) if source[r] == i]
        got = [offsets.get(str(r), [0, 0, 0]) for r in copies]
        check(all(abs(g[k] - want[k]) <= q for g in got for k in range(3)),
              f"leaving Sculpt mode sends vertex {i}'s sculpt to its {len(copies)} render copies: {got} vs {want}")
    sco[3 * edit[2]] += 0.02
    sk.data.foreach_set("co", sco)
    r = bpy.ops.deformd.push_sculpt()
    drain()
    off = srv.ctl("sculpt.get", "ball")["offsets"][str(edit[2])]
    check(r == {"FINISHED"} and abs(off[0] - (sco[3 * edit[2]] - base[3 * edit[2]])) <= q,
          f"Push sculpt sends a sculpt edit: {off}")
    check(max_diff(srv.shape("ball"), evaluated(obj), 3 * n) < 1e-5, "Blender's mix is still the server's shape")

    # ---- new keys and new targets -------------------------------------------------------------
    bulge = obj.shape_key_add(name="bulge", from_mix=False)
    co = array("f", base)
    for i in range(0, 3 * n, 3):
        co[i + 1] *= 1.3 if co[i + 1] > 0.5 else 1.0
    bulge.data.foreach_set("co", co)
    bulge.value = 0.4
    before = srv.ctl("sculpt.get", "ball")["offsets"]
    drain()
    t = {x["name"]: x for x in srv.ctl("targets.list", "ball")}
    check("bulge" in t and t["bulge"]["value"] == 0.4, f"a new shape key is a new target: {sorted(t)}")
    check(srv.ctl("sculpt.get", "ball")["offsets"] == before, "making it kept the sculpt layer as it was")
    check(max_diff(srv.shape("ball"), evaluated(obj), 3 * n) < 1e-5, "the new target is the key's shape")

    srv.call("brush.stroke", session="ball", brush="inflate", radius=0.5, strength=0.5,
             samples=[{"center": [0, -1, 0]}])
    v = srv.call("targets.create_from_sculpt", session="ball", name="carved")["version"]
    until(lambda: meshio.find_key(mesh, "carved") is not None and L.version >= v and not L.want_sculpt
          and not L.want_targets, "a target made on the server reaches Blender", drain)
    check(meshio.find_key(mesh, "carved").value == 1.0, "a target made on the server is a key at its weight")
    check(max_diff(srv.shape("ball"), evaluated(obj), 3 * n) < 1e-5, "with it, Blender's mix is the server's shape")

    # ---- reconnect ----------------------------------------------------------------------------
    srv.stop()
    until(lambda: L.status == "disconnected", "a stopped server shows as disconnected", drain)
    check("disconnected" in L.error, f"the status says why: {L.error}")
    srv.start()
    r = bpy.ops.deformd.reconnect()
    check(r == {"FINISHED"} and L.status == "linked", f"Reconnect links again: {L.status} {L.error}")
    srv.ctl("weights.set", "ball", "raise=0.125")
    until(lambda: raise_.value == 0.125, "after reconnecting, weights reach the key", drain)

    # ---- refusals and a mesh that no longer matches -------------------------------------------
    squash.slider_max = 1.5
    squash.value = 1.25
    drain()
    t = {x["name"]: x for x in srv.ctl("targets.list", "ball")}["squash"]
    check(L.status == "linked" and (t["min"], t["max"], t["value"]) == (-1, 1.5, 1.25),
          f"a slider range and a value set together in Blender reach the target: {t}")
    srv.call("targets.configure", session="ball", target="squash", min=0, max=1)
    until(lambda: squash.slider_max == 1 and squash.value == 1, "a narrowed range reaches the key", drain)
    basis = mesh.shape_keys.reference_key
    moved = key_co(basis)
    moved[2] += 0.5
    bpy.ops.object.mode_set(mode="SCULPT")
    drain()
    basis.data.foreach_set("co", moved)
    bpy.ops.object.mode_set(mode="OBJECT")
    drain()
    check(L.status == "paused" and "the Basis moved 1 vertices" in L.error, f"a moved Basis pauses the link: {L.error}")
    basis.data.foreach_set("co", base)
    drain()
    check(L.status == "linked", f"undoing it resumes the link: {L.status} {L.error}")
    mesh.vertices.add(1)
    drain()
    check(L.status == "paused" and f"{n + 1} vertices" in L.error, f"a changed vertex count pauses the link: {L.error}")
    srv.ctl("weights.set", "ball", "raise=0.5")
    drain()
    check(raise_.value == 0.125, "a paused link changes nothing")
    bm = bmesh.new()
    bm.from_mesh(mesh)
    bm.verts.ensure_lookup_table()
    bm.verts.remove(bm.verts[-1])
    bm.to_mesh(mesh)
    bm.free()
    until(lambda: raise_.value == 0.5, "taking the vertex away resumes the link", drain)
    bpy.ops.deformd.unlink()
    check(obj.name not in link.LINKS, "Unlink ends the link")

    # ---- Link to session, and a new file ------------------------------------------------------
    r = bpy.ops.deformd.attach()
    check(r == {"FINISHED"} and link.LINKS[obj.name].session == "ball",
          "Link to session links the object to the session it remembers")
    srv.ctl("weights.set", "ball", "raise=0.375")
    until(lambda: raise_.value == 0.375, "the relinked object follows the session", drain)
    bpy.ops.wm.read_homefile(use_empty=True)
    check(not link.LINKS, "loading another file ends the links")
    srv.stop()
    print("blender link: all checks passed", flush=True)


try:
    main()
finally:
    for server in SERVERS:
        if server.p.poll() is None:
            server.p.kill()
            server.p.wait()
