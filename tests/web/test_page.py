#!/usr/bin/python3
"""test_page.py BUILD_DIR TEST — the browser viewer (viewer/web/) in headless Chromium against a
live deformd on the demo head. Each TEST is one ctest test (tests/CMakeLists.txt); run
`test_page.py BUILD_DIR --list` for their names.

The oracles: `deformctl watch --dump` (the C replica's positions, the reference of the one formula)
and the server's own export; the server's weights (weights.get); the same ARAP gesture sent by
JSON-RPC; normals computed here from the dumped shape (angle-weighted over the welded mesh, as
shared/mesh_normals.c does); the camera's projection of the vertices a target moves. Every wait is
on a condition (a version, a flag), bounded by a timeout that only fails the test.

Chromium: Debian's chromium and chromium-driver with python3-selenium; WebGL2 on SwiftShader
(--use-gl=angle --use-angle=swiftshader --enable-unsafe-swiftshader, --headless=new).
"""
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.by import By

BUILD = None
TMP = tempfile.mkdtemp(prefix="deformd-web-")
SHOTS = None


def fail(msg):
    raise AssertionError(msg)


def wait_for(what, cond, timeout=60.0, every=0.05):
    """Polls cond() until it is truthy; fails after `timeout` seconds (a bound, never a result)."""
    end = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.time() > end:
            fail(f"timed out waiting for {what}")
        time.sleep(every)


class Server:
    def __init__(self, *args, admin_token=None, demo=True):
        self.log = open(os.path.join(TMP, f"deformd-{time.time_ns()}.log"), "w")
        env = dict(os.environ)
        env.pop("DEFORMD_ADMIN_TOKEN", None)
        if admin_token:  # the administrator's token comes from the environment, never the command line
            env["DEFORMD_ADMIN_TOKEN"] = admin_token
        self.p = subprocess.Popen([os.path.join(BUILD, "bin", "deformd"), *(["--demo"] if demo else []), "--data", "none",
                                   "--stream-port", "0",
                                   "--rpc-port", "0", "--http-port", "0", "--log-level", "warn", *args],
                                  stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        line = self.p.stdout.readline()
        m = re.match(r"stream_port=(\d+) rpc_port=(\d+) http_port=(\d+)", line)
        if not m:
            fail(f"deformd printed {line!r}")
        self.stream, self.rpc_port, self.http = map(int, m.groups())
        self.sock = socket.create_connection(("127.0.0.1", self.rpc_port))
        self.rfile = self.sock.makefile("r")
        self.id = 0
        if admin_token:
            self.call("auth", {"token": admin_token})
        if demo:
            wait_for("the demo session", lambda: any(s["session"] == "demo" for s in self.call("session.list")))

    def call(self, method, params=None, ok=True):
        self.id += 1
        req = {"jsonrpc": "2.0", "id": self.id, "method": method}
        if params is not None:
            req["params"] = params
        self.sock.sendall((json.dumps(req) + "\n").encode())
        line = self.rfile.readline()
        if not line:
            fail(f"{method}: deformd closed the JSON-RPC connection (exit status {self.p.poll()}); log {self.log.name}")
        r = json.loads(line)
        if ok and "error" in r:
            fail(f"{method} {params}: {r['error']}")
        return r.get("result") if ok else r

    def version(self):
        return self.call("state.get", {"session": "demo"})["version"]

    def ctl(self, *args, timeout=60):
        cmd = [os.path.join(BUILD, "bin", "deformctl"), "--rpc", f"127.0.0.1:{self.rpc_port}", "--stream",
               f"127.0.0.1:{self.stream}", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            fail(f"{' '.join(cmd)}: {r.stderr}")
        return r.stdout

    def stop(self):
        """SIGTERM: deformd must say goodbye and exit 0 (under the sanitizers, with no report)."""
        self.sock.close()
        self.p.terminate()
        try:
            status = self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail(f"deformd did not stop within 30 s of SIGTERM; log {self.log.name}")
        self.log.flush()
        if status != 0:
            with open(self.log.name) as fh:
                fail(f"deformd exited with status {status}: {fh.read()[-3000:]}")


def browser(width=1000, height=750):
    o = webdriver.ChromeOptions()
    for a in ["--headless=new", "--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
              "--no-sandbox", "--disable-gpu-sandbox", f"--window-size={width},{height}", "--disable-dev-shm-usage",
              "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
              "--disable-backgrounding-occluded-windows"]:
        o.add_argument(a)
    o.binary_location = "/usr/bin/chromium"
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def open_page(d, srv, query="session=demo"):
    d.get(f"http://127.0.0.1:{srv.http}/?{query}")
    wait_for("the page's first frame", lambda: d.execute_script("return !!(window.deformView && deformView.firstFrameMs)"))


def page_at(d, version, timeout=60):
    wait_for(f"the page at version {version}",
             lambda: d.execute_script("return deformView.version === arguments[0] && deformView.drawnVersion === arguments[0]",
                                      version), timeout)


def page_positions(d):
    return d.execute_script("return Array.from(deformView.positions())")


def read_obj(path):
    v, f = [], []
    with open(path) as fh:
        for line in fh:
            if line.startswith("v "):
                v.append(tuple(float(x) for x in line.split()[1:4]))
            elif line.startswith("f "):
                f.append(tuple(int(x.split("/")[0]) - 1 for x in line.split()[1:4]))
    return v, f


def dump(srv, name):
    """The shape a version 2 viewer on the session's default grid holds (the page's grid), as the
    C replica evaluates it."""
    path = os.path.join(TMP, name)
    srv.ctl("watch", "demo", "--count", "0", "--quantised", "--dump", path)
    return read_obj(path)


def diagonal(v):
    lo = [min(p[i] for p in v) for i in range(3)]
    hi = [max(p[i] for p in v) for i in range(3)]
    return math.dist(lo, hi)


def max_error(flat, verts):
    return max(abs(flat[3 * i + k] - verts[i][k]) for i in range(len(verts)) for k in range(3))


def canvas_pixels(d):
    """The canvas as drawn (preserveDrawingBuffer), without the page's overlays: (w, h, RGBA bytes)."""
    url = d.execute_script("return document.getElementById('view').toDataURL('image/png')")
    import base64
    import zlib
    png = base64.b64decode(url.split(",", 1)[1])
    # A minimal PNG reader (8-bit RGBA or RGB, no interlace): Chromium writes exactly that.
    pos, chunks, w, h, ct = 8, [], 0, 0, 6
    while pos < len(png):
        n = int.from_bytes(png[pos:pos + 4], "big")
        t = png[pos + 4:pos + 8]
        data = png[pos + 8:pos + 8 + n]
        if t == b"IHDR":
            w, h, ct = int.from_bytes(data[0:4], "big"), int.from_bytes(data[4:8], "big"), data[9]
        elif t == b"IDAT":
            chunks.append(data)
        pos += 12 + n
    raw = zlib.decompress(b"".join(chunks))
    bpp = 4 if ct == 6 else 3
    stride = w * bpp
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return w, h, bpp, bytes(out)


def click_slider(d, el, frac):
    """Clicks a range input at `frac` of its width (Selenium's offsets count from the centre)."""
    ActionChains(d).move_to_element_with_offset(el, int(el.size["width"] * (frac - 0.5)), 0).click().perform()


def canvas_projection(d):
    """The page's camera now as a function: a point to its canvas pixel (x right, y down)."""
    cam = d.execute_script("return deformView.camera()")
    m = cam["mvp"]

    def px(p):
        x = m[0] * p[0] + m[4] * p[1] + m[8] * p[2] + m[12]
        y = m[1] * p[0] + m[5] * p[1] + m[9] * p[2] + m[13]
        ww = m[3] * p[0] + m[7] * p[1] + m[11] * p[2] + m[15]
        return ((x / ww + 1) / 2 * cam["width"], (1 - y / ww) / 2 * cam["height"])

    return px


def shot(d, name):
    if SHOTS:
        d.save_screenshot(os.path.join(SHOTS, name))


# ---- tests --------------------------------------------------------------------------------------

def test_the_page_draws_the_shape_deformctl_watch_computes():
    """Weights and a sculpt set from JSON-RPC: the positions the page's GPU computed equal the C
    replica's (deformctl watch --dump) within 1e-5 of the diagonal, and its normals the
    angle-weighted normals of that shape."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        srv.call("weights.set", {"session": "demo", "weights": {"smile_L": 0.8, "jaw_open": 0.35, "brow_up_R": 1,
                                                                 "cheek_puff": 0.5, "nose_wide": -0.0}})
        offsets = {str(v): [0.002 * math.sin(v), 0.003, -0.001 * math.cos(v)] for v in range(20000, 20600, 3)}
        srv.call("sculpt.set", {"session": "demo", "offsets": offsets})
        version = srv.version()
        page_at(d, version)
        verts, faces = dump(srv, "shape.obj")
        diag = diagonal(verts)
        got = page_positions(d)
        err = max_error(got, verts)
        print(f"positions: max error {err:.3g} ({err / diag:.3g} of the diagonal {diag:.4f})")
        if not err <= 1e-5 * diag:
            fail(f"page positions differ from deformctl watch by {err}")
        # Normals: angle-weighted over triangles welded by position (the page welds the same way).
        key = {}
        topo = [key.setdefault(tuple(round(c, 9) for c in p), len(key)) for p in verts]
        acc = [[0.0, 0.0, 0.0] for _ in key]
        for f in faces:
            q = [verts[i] for i in f]
            if len({topo[i] for i in f}) < 3:
                continue
            e1 = [q[1][k] - q[0][k] for k in range(3)]
            e2 = [q[2][k] - q[0][k] for k in range(3)]
            n = [e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]]
            ln = math.sqrt(sum(x * x for x in n))
            if ln <= 0:
                continue
            for c in range(3):
                u = [q[(c + 1) % 3][k] - q[c][k] for k in range(3)]
                w = [q[(c + 2) % 3][k] - q[c][k] for k in range(3)]
                cr = [u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]]
                ang = math.atan2(math.sqrt(sum(x * x for x in cr)), sum(u[k] * w[k] for k in range(3)))
                for k in range(3):
                    acc[topo[f[c]]][k] += ang * n[k] / ln
        nrm = d.execute_script("return Array.from(deformView.normals())")
        worst, bad = 0.0, 0
        for v in range(len(verts)):
            a = acc[topo[v]]
            la = math.sqrt(sum(x * x for x in a))
            if la == 0:
                continue
            dot = sum(a[k] / la * nrm[3 * v + k] for k in range(3))
            ang = math.degrees(math.acos(max(-1.0, min(1.0, dot))))
            worst = max(worst, ang)
            bad += ang > 0.5
        print(f"normals: worst {worst:.3f} degrees, {bad} of {len(verts)} over 0.5 degrees")
        if bad > len(verts) // 1000:
            fail(f"{bad} normals differ from the reference by more than 0.5 degrees")
        shot(d, "page-smile.png")
    finally:
        d.quit()
        srv.stop()


def test_a_slider_move_in_the_page_reaches_deformctl_watch():
    """A click on jaw_open's slider sends one weights EDIT: a deformctl watch started before it
    receives that WEIGHTS frame, and the shape it dumps is the page's."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        v0 = srv.version()
        path = os.path.join(TMP, "slider.obj")
        watch = subprocess.Popen([os.path.join(BUILD, "bin", "deformctl"), "--stream", f"127.0.0.1:{srv.stream}", "watch",
                                  "demo", "--count", "1", "--quantised", "--dump", path], stdout=subprocess.PIPE, text=True)
        wait_for("the watcher joined", lambda: srv.call("state.get", {"session": "demo"})["viewers"] >= 2)
        sliders = d.find_elements(By.CSS_SELECTOR, "#sliders input[type=range]")
        jaw = sliders[0]
        click_slider(d, jaw, 0.3)
        out, _ = watch.communicate(timeout=60)
        if watch.returncode != 0 or "type=WEIGHTS" not in out:
            fail(f"deformctl watch saw no WEIGHTS frame: {out}")
        w = srv.call("weights.get", {"session": "demo"})
        jaw_w = w["weights"][0] if isinstance(w["weights"], list) else w["weights"]["jaw_open"]
        print(f"slider set jaw_open to {jaw_w}; watch: {out.strip().splitlines()[-2]}")
        if not (0.2 < jaw_w < 0.5):
            fail(f"jaw_open is {jaw_w} after a click at 30 % of its slider")
        version = int(re.search(r"version=(\d+) type=WEIGHTS", out).group(1))
        if version != v0 + 1:
            fail(f"the slider's edit is version {version}, expected {v0 + 1}")
        page_at(d, version)
        verts, _ = dump(srv, "slider-now.obj")
        watched, _ = read_obj(path)
        err = max_error(page_positions(d), watched)
        if not err <= 1e-5 * diagonal(watched):
            fail(f"the page's shape differs from deformctl watch's by {err}")
        shown = float(d.execute_script("return document.querySelector('#sliders .val').textContent"))
        if abs(shown - jaw_w) > 0.006:
            fail(f"the slider shows {shown}, the server has {jaw_w}")
    finally:
        d.quit()
        srv.stop()


def test_weights_set_changes_the_pages_pixels_only_where_the_target_moves():
    """weights.set jaw_open=1 from deformctl: the canvas changes, and every changed pixel lies near
    the projection of a vertex the target moves (before or after); none elsewhere."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        before_v, _ = dump(srv, "before.obj")
        w, h, bpp, a = canvas_pixels(d)
        srv.ctl("weights.set", "demo", "jaw_open=1")
        page_at(d, srv.version())
        after_v, _ = dump(srv, "after.obj")
        _, _, _, b = canvas_pixels(d)
        shot(d, "page-jaw.png")
        cam = d.execute_script("return deformView.camera()")
        m = cam["mvp"]
        moved = [i for i in range(len(before_v)) if math.dist(before_v[i], after_v[i]) > 1e-7]

        def px(p):
            x = m[0] * p[0] + m[4] * p[1] + m[8] * p[2] + m[12]
            y = m[1] * p[0] + m[5] * p[1] + m[9] * p[2] + m[13]
            ww = m[3] * p[0] + m[7] * p[1] + m[11] * p[2] + m[15]
            return ((x / ww + 1) / 2 * cam["width"], (1 - y / ww) / 2 * cam["height"])

        cell = 4  # a grid of the moved vertices' pixels, dilated by `reach`
        reach = 10
        near = set()
        for i in moved:
            for p in (px(before_v[i]), px(after_v[i])):
                cx, cy = int(p[0] // cell), int(p[1] // cell)
                for dx in range(-reach // cell - 1, reach // cell + 2):
                    for dy in range(-reach // cell - 1, reach // cell + 2):
                        near.add((cx + dx, cy + dy))
        changed = far = 0
        for y in range(h):
            for x in range(w):
                o = (y * w + x) * bpp
                if max(abs(a[o + k] - b[o + k]) for k in range(3)) > 8:
                    changed += 1
                    if (x // cell, y // cell) not in near:
                        far += 1
        print(f"{len(moved)} vertices moved; {changed} pixels changed, {far} of them away from every moved vertex")
        if changed < 500:
            fail(f"only {changed} pixels changed")
        if far > 0:
            fail(f"{far} pixels changed where jaw_open moves nothing")
    finally:
        d.quit()
        srv.stop()


def test_a_drag_in_the_page_equals_the_same_gesture_by_json_rpc_and_undo_reverts_it():
    """The mouse drags the nose tip in drag mode: the page runs an ARAP gesture (EDIT). Its result
    equals the same gesture sent by JSON-RPC (deform.begin/drag/end with the page's parameters,
    after the page's Undo put the shape back to what it was)."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        base, _ = dump(srv, "base.obj")
        d.find_element(By.ID, "mode-drag").click()
        canvas = d.find_element(By.ID, "view")
        nose = d.execute_script("return deformView.project(20400)")
        ox = int(nose["x"] - canvas.size["width"] / 2)
        oy = int(nose["y"] - canvas.size["height"] / 2)
        # One move: the page sends one drag (ARAP warm-starts each drag from the one before, so the
        # JSON-RPC replay below must send the same sequence; a user's drag sends one per frame).
        ActionChains(d).move_to_element_with_offset(canvas, ox, oy).click_and_hold().move_by_offset(24, -30).release().perform()
        g = wait_for("the page's gesture to end", lambda: d.execute_script(
            "const g = deformView.lastGesture; return g && g.ended ? g : null"))
        wait_for("the gesture's last solve", lambda: srv.call("state.get", {"session": "demo"})["gestures"] == 0)
        v1 = srv.version()
        page_at(d, v1)
        dragged, _ = dump(srv, "dragged.obj")
        diag = diagonal(base)
        moved = sum(math.dist(p, q) > 1e-6 for p, q in zip(base, dragged))
        print(f"page gesture: pick {g['pick']}, translate {g['translate']} ({g['drags']} drag), {moved} vertices moved")
        if g["drags"] != 1:
            fail(f"the page sent {g['drags']} drags for one move")
        if moved < 50 or math.dist(dragged[g["pick"]], base[g["pick"]]) < 1e-3 * diag:
            fail("the drag moved nothing")
        err = max_error(page_positions(d), dragged)
        if not err <= 1e-5 * diag:
            fail(f"the page's shape after the drag differs from deformctl watch's by {err}")
        shot(d, "page-drag.png")
        d.find_element(By.ID, "undo").click()
        wait_for("the undo", lambda: srv.version() > v1)
        v2 = srv.version()
        page_at(d, v2)
        undone, _ = dump(srv, "undone.obj")
        err = max_error(page_positions(d), base)
        if max(math.dist(p, q) for p, q in zip(undone, base)) != 0 or err > 1e-5 * diag:
            fail("undo in the page did not bring the shape back")
        # The same gesture by JSON-RPC, from the same shape.
        srv.call("deform.begin", {"session": "demo", "gesture": 777, "mode": "arap", "iterations": g["iterations"],
                                  "pick": g["pick"], "handle_radius": g["handleRadius"], "roi_radius": g["roiRadius"]})
        srv.call("deform.drag", {"session": "demo", "gesture": 777, "translate": g["translate"]})
        srv.call("deform.end", {"session": "demo", "gesture": 777})
        again, _ = dump(srv, "again.obj")
        err = max(math.dist(p, q) for p, q in zip(again, dragged))
        print(f"JSON-RPC gesture vs the page's: max difference {err:.3g} ({err / diag:.3g} of the diagonal)")
        if not err <= 1e-5 * diag:
            fail(f"the same gesture by JSON-RPC differs by {err}")
    finally:
        d.quit()
        srv.stop()


def test_a_brush_stroke_in_the_page_sculpts_both_sides_with_mirror_x():
    """Brush mode, inflate, mirror X on: a stroke on the right cheek moves vertices on both sides
    of x = 0, mirror images of each other, and the page draws the server's result."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        d.find_element(By.ID, "mode-brush").click()
        d.find_element(By.ID, "sym-x").click()
        canvas = d.find_element(By.ID, "view")
        nose = d.execute_script("return deformView.project(20400)")
        ox = int(nose["x"] - canvas.size["width"] / 2) - 45
        oy = int(nose["y"] - canvas.size["height"] / 2) + 15
        ActionChains(d).move_to_element_with_offset(canvas, ox, oy).click_and_hold().move_by_offset(-8, 6).release().perform()
        wait_for("the stroke", lambda: srv.call("state.get", {"session": "demo"})["sculpted_vertices"] > 0)
        v = srv.version()
        page_at(d, v)
        offsets = srv.call("sculpt.get", {"session": "demo"})["offsets"]
        verts, _ = dump(srv, "brushed.obj")
        moved = [int(k) for k in offsets]
        left = sum(verts[i][0] < -0.005 for i in moved)
        right = sum(verts[i][0] > 0.005 for i in moved)
        print(f"{len(moved)} vertices sculpted: {left} with x < 0, {right} with x > 0")
        if left < 10 or right < 10 or abs(left - right) > 0.2 * max(left, right):
            fail(f"a mirrored stroke moved {left} vertices on one side and {right} on the other")
        if not max_error(page_positions(d), verts) <= 1e-5 * diagonal(verts):
            fail("the page does not draw the brushed shape")
        shot(d, "page-brush.png")
    finally:
        d.quit()
        srv.stop()


def test_symmetry_y_in_the_page_is_the_servers_mirror_across_the_up_axis_in_one_step():
    """Brush mode, inflate, symmetry Y (which clears X): a stroke on the lower face moves the
    vertices around its mirror image across y = 0 (the demo head's up axis) as well, in one
    stroke, one step of the history: the server mirrors it (BRUSH byte 8), the page sends
    nothing more on release."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        verts, _ = dump(srv, "sym-base.obj")
        # A vertex on the face below y = 0 whose mirror image across y = 0 lies on the surface.
        band = [i for i in range(0, len(verts), 7) if -0.07 < verts[i][1] < -0.045 and verts[i][2] > 0.05 and verts[i][0] > 0.02]
        def mirror_gap(i):
            x, y, z = verts[i]
            return min((p[0] - x) ** 2 + (p[1] + y) ** 2 + (p[2] - z) ** 2 for p in verts[::3])
        at = min(band[::4], key=mirror_gap)
        here = verts[at]
        there = (here[0], -here[1], here[2])
        d.find_element(By.ID, "mode-brush").click()
        d.find_element(By.ID, "sym-x").click()
        d.find_element(By.ID, "sym-y").click()
        if d.execute_script("return document.getElementById('sym-x').checked"):
            fail("ticking Y left X ticked: one plane at a time")
        d.execute_script("const s = document.getElementById('brush'); s.value = '1';"
                         "s.dispatchEvent(new Event('change'))")
        canvas = d.find_element(By.ID, "view")
        px = d.execute_script("return deformView.project(arguments[0])", at)
        ox = int(px["x"] - canvas.size["width"] / 2)
        oy = int(px["y"] - canvas.size["height"] / 2)
        ActionChains(d).move_to_element_with_offset(canvas, ox, oy).click_and_hold().move_by_offset(-4, 2).release().perform()
        wait_for("the stroke", lambda: srv.call("state.get", {"session": "demo"})["sculpted_vertices"] > 0)
        seq = d.execute_script("return deformView.ping()")
        wait_for("the PONG after the stroke", lambda: d.execute_script("return deformView.lastPong") >= seq)
        moved = [int(k) for k in srv.call("sculpt.get", {"session": "demo"})["offsets"]]
        near = sum(math.dist(verts[i], here) < 0.03 for i in moved)
        mirrored = sum(math.dist(verts[i], there) < 0.03 for i in moved)
        print(f"{len(moved)} vertices sculpted: {near} around the stroke at y = {here[1]:.3f}, {mirrored} around its mirror image")
        if near < 10 or mirrored < 10 or near + mirrored != len(moved):
            fail(f"symmetry Y moved {near} vertices at the stroke, {mirrored} at its mirror, {len(moved)} in all")
        strokes = [s for s in srv.call("history.list", {"session": "demo"})["steps"] if s["kind"] == "brush"]
        if len(strokes) != 1:
            fail(f"a mirrored stroke is not one step: {strokes}")
    finally:
        d.quit()
        srv.stop()


def test_a_grab_in_the_page_follows_the_pointer_and_undoes_in_one_step():
    """Brush mode, grab: a stroke of several pointer moves drags the nose the way the pointer went
    (its points lie on the plane facing the camera, one stroke continued piece by piece), and the
    page's Undo, once, brings back the shape from before it, exactly; Redo brings the grab back."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv, "session=demo&author=grabber")
        base, _ = dump(srv, "grab-base.obj")
        d.find_element(By.ID, "mode-brush").click()
        d.execute_script("const s = document.getElementById('brush'); s.value = '0';"
                         "s.dispatchEvent(new Event('change'))")
        canvas = d.find_element(By.ID, "view")
        nose0 = d.execute_script("return deformView.project(20400)")
        ox = int(nose0["x"] - canvas.size["width"] / 2)
        oy = int(nose0["y"] - canvas.size["height"] / 2)
        chain = ActionChains(d).move_to_element_with_offset(canvas, ox, oy).click_and_hold()
        for _ in range(4):
            chain = chain.move_by_offset(6, -4)
        chain.release().perform()
        # Every piece has reached the server once the PONG of a later PING is back.
        seq = d.execute_script("return deformView.ping()")
        wait_for("the PONG after the stroke", lambda: d.execute_script("return deformView.lastPong") >= seq)
        d.find_element(By.ID, "undo").click()
        undo = wait_for("the page's undo", lambda: d.execute_script("return deformView.lastHistory"))
        print(f"undo: {undo}")
        if undo["kind"] != "brush" or undo["author"] != "grabber":
            fail(f"the undo took back {undo}, not the page's grab")
        steps = srv.call("history.list", {"session": "demo"})["steps"]
        strokes = [s for s in steps if s["kind"] == "brush"]
        if len(strokes) != 1 or strokes[0]["operations"] < 2 or not strokes[0]["undone"]:
            fail(f"the grab is not one undone step of several pieces: {steps}")
        page_at(d, undo["version"])
        undone, _ = dump(srv, "grab-undone.obj")
        if max(math.dist(p, q) for p, q in zip(undone, base)) != 0:
            fail("one undo did not bring back the shape from before the grab")
        d.execute_script("deformView.clearHistory()")
        d.find_element(By.ID, "redo").click()
        redo = wait_for("the page's redo", lambda: d.execute_script("return deformView.lastHistory"))
        page_at(d, redo["version"])
        grabbed, _ = dump(srv, "grab-redone.obj")
        nose1 = d.execute_script("return deformView.project(20400)")
        dx, dy = nose1["x"] - nose0["x"], nose1["y"] - nose0["y"]
        moved = math.dist(grabbed[20400], base[20400])
        print(f"the nose moved {moved / diagonal(base):.3g} of the diagonal, ({dx:.1f}, {dy:.1f}) px on screen "
              f"for a pointer move of (24, -16)")
        # The grab follows the pointer: on screen the nose goes right and up, as the pointer did.
        if math.hypot(dx, dy) < 4 or (dx * 24 - dy * 16) / (math.hypot(dx, dy) * math.hypot(24, 16)) < 0.9:
            fail(f"the nose moved ({dx:.1f}, {dy:.1f}) px for a pointer move of (24, -16)")
        if not max_error(page_positions(d), grabbed) <= 1e-5 * diagonal(grabbed):
            fail("the page does not draw the grabbed shape")
        shot(d, "page-grab.png")
    finally:
        d.quit()
        srv.stop()


def test_touch_one_finger_orbits_two_fingers_zoom():
    """Touch input (W3C touch pointers): one finger dragged across the canvas turns the camera
    (the projection of a vertex moves sideways), two fingers spreading apart bring it closer (the
    projected distance between two vertices grows)."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.actions.interaction import POINTER_TOUCH
    from selenium.webdriver.common.actions.pointer_input import PointerInput
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        canvas = d.find_element(By.ID, "view")
        r = canvas.rect
        cx, cy = int(r["x"] + r["width"] / 2 - 150), int(r["y"] + r["height"] / 2)
        p0 = d.execute_script("return deformView.project(20400)")
        a = ActionBuilder(d, mouse=PointerInput(POINTER_TOUCH, "f1"))
        a.pointer_action.move_to_location(cx, cy).pointer_down()
        for k in range(1, 6):
            a.pointer_action.move_to_location(cx + 12 * k, cy)
        a.pointer_action.pointer_up()
        a.perform()
        p1 = wait_for("the orbit", lambda: (lambda p: p if abs(p["x"] - p0["x"]) > 5 else None)(
            d.execute_script("return deformView.project(20400)")), 10)
        print(f"one finger: the nose tip moved from x {p0['x']:.1f} to {p1['x']:.1f}")
        spread0 = d.execute_script("const a = deformView.project(20400), b = deformView.project(0);"
                                   "return Math.hypot(a.x - b.x, a.y - b.y)")
        f1 = PointerInput(POINTER_TOUCH, "f1")
        f2 = PointerInput(POINTER_TOUCH, "f2")
        b = ActionBuilder(d, mouse=f1)
        b.devices.append(f2)
        f1.create_pointer_move(x=cx - 20, y=cy)
        f2.create_pointer_move(x=cx + 20, y=cy)
        f1.create_pointer_down()
        f2.create_pointer_down()
        for k in range(1, 6):
            f1.create_pointer_move(x=cx - 20 - 15 * k, y=cy)
            f2.create_pointer_move(x=cx + 20 + 15 * k, y=cy)
        f1.create_pointer_up(0)
        f2.create_pointer_up(0)
        b.perform()
        spread1 = wait_for("the zoom", lambda: (lambda s: s if s > spread0 * 1.2 else None)(d.execute_script(
            "const a = deformView.project(20400), b = deformView.project(0); return Math.hypot(a.x - b.x, a.y - b.y)")), 10)
        print(f"two fingers: two vertices {spread0:.1f} px apart, then {spread1:.1f} px")
    finally:
        d.quit()
        srv.stop()


def test_ten_pages_and_two_deform_views_converge_to_the_same_version():
    """Ten pages (windows) and two deform-views follow one session through twelve edits from JSON-RPC
    and from a page's slider: all end at the same version, the pages with the same positions,
    equal to deformctl watch's."""
    srv = Server()
    d = browser(420, 320)  # small windows: ten pages draw every change on the CPU (SwiftShader)
    views = []
    try:
        open_page(d, srv)
        tabs = [d.current_window_handle]
        for _ in range(9):
            d.switch_to.new_window("window")  # its own window: a hidden tab gets no animation frames
            open_page(d, srv)
            tabs.append(d.current_window_handle)
        start = srv.version()
        final = start + 12
        env = dict(os.environ)
        for k in range(2):
            views.append(subprocess.Popen([os.path.join(BUILD, "bin", "deform-view"), "--connect", f"127.0.0.1:{srv.stream}",
                                           "--session", "demo", "--screenshot", os.path.join(TMP, f"view{k}.png"),
                                           "--size", "320x240", "--wait-version", str(final), "--timeout", "120"],
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        wait_for("every viewer joined", lambda: srv.call("state.get", {"session": "demo"})["viewers"] >= 12, 60)
        names = ["jaw_open", "smile_L", "smile_R", "brow_up_L", "blink_R"]
        for i in range(11):
            if i % 4 == 3:
                srv.call("sculpt.set", {"session": "demo", "offsets": {str(20000 + i): [0.001 * i, 0, 0]}})
            else:
                srv.call("weights.set", {"session": "demo", "weights": {names[i % 5]: round(0.08 * (i + 1), 2)}})
        d.switch_to.window(tabs[3])  # the twelfth edit: a slider in one of the pages
        s = d.find_elements(By.CSS_SELECTOR, "#sliders input[type=range]")[1]
        click_slider(d, s, 0.25)
        try:
            wait_for(f"the slider's edit (version {final})", lambda: srv.version() >= final, 120)
        except AssertionError:
            print("page:", d.execute_script("return [deformView.connected, deformView.readOnly, deformView.version, "
                                            "document.getElementById('status').textContent]"), "server:", srv.version())
            for e in d.get_log("browser"):
                print(e)
            raise
        final = srv.version()
        ref, _ = dump(srv, "converged.obj")
        diag = diagonal(ref)
        first = None
        for t in tabs:
            d.switch_to.window(t)
            page_at(d, final, 120)
            p = page_positions(d)
            first = first or p
            if p != first:
                fail("two pages hold different positions at the same version")
        err = max_error(first, ref)
        if not err <= 1e-5 * diag:
            fail(f"the pages' shape differs from deformctl watch's by {err}")
        for k, v in enumerate(views):
            _, errs = v.communicate(timeout=120)
            if v.returncode != 0:
                fail(f"deform-view {k} did not reach version {final}: {errs}")
        print(f"10 pages and 2 deform-views at version {final}; pages within {err:.3g} of deformctl watch")
    finally:
        for v in views:
            if v.poll() is None:
                v.kill()
        d.quit()
        srv.stop()


def test_a_page_with_a_viewer_token_is_read_only():
    """On a server with tokens, a page with a viewer's token joins as a viewer (its editor HELLO is
    refused with FORBIDDEN) and says so; with an editor's (here the administrator's) it edits."""
    srv = Server(admin_token="s3cret")
    viewer = srv.call("token.create", {"role": "viewer", "session": "demo", "user": "page"})["token"]
    d = browser()
    try:
        open_page(d, srv, f"session=demo&token={viewer}")
        wait_for("read-only", lambda: d.execute_script("return deformView.readOnly"))
        if "read-only" not in d.find_element(By.ID, "status").text:
            fail("the status line does not say read-only")
        open_page(d, srv, "session=demo&token=s3cret")
        wait_for("an editor", lambda: d.execute_script("return deformView.connected && !deformView.readOnly"))
        s = d.find_elements(By.CSS_SELECTOR, "#sliders input[type=range]")[1]
        click_slider(d, s, 0.25)
        wait_for("the editor's edit", lambda: d.execute_script("return deformView.version") == 1)
    finally:
        d.quit()
        srv.stop()


def test_the_page_joins_again_after_the_server_restarts():
    """The server stops and a new one takes its port: the page reconnects (backoff) and draws the
    new session's state."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        port = srv.http
        srv.stop()
        wait_for("the page to notice", lambda: not d.execute_script("return deformView.connected"))
        srv = Server("--http-port", str(port))
        srv.call("weights.set", {"session": "demo", "weights": {"smile_R": 0.9}})
        page_at(d, srv.version(), 60)
        verts, _ = dump(srv, "restart.obj")
        if not max_error(page_positions(d), verts) <= 1e-5 * diagonal(verts):
            fail("after the reconnect the page does not show the new state")
    finally:
        d.quit()
        srv.stop()


def test_a_reload_keeps_the_pages_author_and_its_undo():
    """Without ?author= the page makes an author once and keeps it in localStorage: after a reload
    it is the same author, so the page's Undo takes back the slider move made before the reload.
    ?author= still overrides it."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        first = d.execute_script("return deformView.author")
        click_slider(d, d.find_elements(By.CSS_SELECTOR, "#sliders input[type=range]")[0], 0.3)
        wait_for("the slider's edit", lambda: srv.call("weights.get", {"session": "demo"})["weights"]["jaw_open"] > 0.1)
        d.refresh()
        wait_for("the page's first frame again",
                 lambda: d.execute_script("return !!(window.deformView && deformView.firstFrameMs)"))
        again = d.execute_script("return deformView.author")
        print(f"author before the reload {first}, after {again}")
        if again != first:
            fail(f"the reload made a new author: {first} became {again}")
        d.find_element(By.ID, "undo").click()
        undo = wait_for("the page's undo", lambda: d.execute_script("return deformView.lastHistory"))
        if undo.get("author") != first:
            fail(f"the undo after the reload was not the page's: {undo}")
        jaw = srv.call("weights.get", {"session": "demo"})["weights"]["jaw_open"]
        if jaw != 0:
            fail(f"jaw_open is {jaw} after undoing the slider move made before the reload")
        open_page(d, srv, "session=demo&author=chosen")
        if d.execute_script("return deformView.author") != "chosen":
            fail("?author= did not name the page's author")
    finally:
        d.quit()
        srv.stop()


def cgal_meshes():
    """libcgal-demo's meshes (deploy/deps.sh puts them under the data directory)."""
    base = os.environ.get("DEFORMD_DATA_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "deformd")
    path = os.path.join(base, "cgal-demo", "data", "meshes")
    if not os.path.isfile(os.path.join(path, "man.off")):
        fail(f"no libcgal-demo meshes in {path}: run deploy/deps.sh")
    return path


# Where the eye sits seen from the point looked at, for Blender's numpad views about each up axis
# (written out by hand from Blender's conventions: front is -Y for Z-up, +Z for Y-up; right is +X;
# top looks down the up axis).
NUMPAD_EYES = {
    "z": {"front": (0, -1, 0), "back": (0, 1, 0), "right": (1, 0, 0), "left": (-1, 0, 0), "top": (0, 0, 1), "bottom": (0, 0, -1)},
    "y": {"front": (0, 0, 1), "back": (0, 0, -1), "right": (1, 0, 0), "left": (-1, 0, 0), "top": (0, 1, 0), "bottom": (0, -1, 0)},
}
NUMPAD_KEYS = {"right": (Keys.NUMPAD3, False), "left": (Keys.NUMPAD3, True), "top": (Keys.NUMPAD7, False),
               "bottom": (Keys.NUMPAD7, True), "back": (Keys.NUMPAD1, True), "front": (Keys.NUMPAD1, False)}


def check_numpad_views(d, up, p, n):
    """Keypad 1, 3, 7 (Alt: the opposite side) put the eye where Blender's views do about the
    session's up axis, within the top and bottom views' 1 degree short of the pole; in the top view
    the front of the mesh (the -Y side for Z-up, +Z for Y-up) is at the bottom of the screen."""
    for view, (key, alt) in NUMPAD_KEYS.items():
        chain = ActionChains(d)
        if alt:
            chain.key_down(Keys.ALT)
        chain.send_keys(key)
        if alt:
            chain.key_up(Keys.ALT)
        chain.perform()
        eye = d.execute_script("return deformView.eyeDirection")
        want = NUMPAD_EYES[up][view]
        dot = sum(a * b for a, b in zip(eye, want))
        print(f"up {up}: {view} view, eye direction {[round(x, 4) for x in eye]} (dot {dot:.5f} with {want})")
        if dot < 0.9998:
            fail(f"up {up}: the {view} view looks from {eye}, not from {want}")
        if view == "top":
            k = 1 if up == "z" else 2
            front = (min if up == "z" else max)(range(n), key=lambda i: p[3 * i + k])
            back = (max if up == "z" else min)(range(n), key=lambda i: p[3 * i + k])
            yf = d.execute_script("return deformView.project(arguments[0]).y", front)
            yback = d.execute_script("return deformView.project(arguments[0]).y", back)
            if not yf > yback:
                fail(f"up {up}: in the top view the front (vertex {front}, y {yf:.1f}) is not below the back ({yback:.1f})")
            shot(d, f"top-{up}.png")


def test_a_z_up_scan_opened_with_up_z_renders_upright():
    """libcgal-demo's man.off stands along +Z (its extent: 0.42 x 0.30 x 1.0). Opened with up "z",
    the page's camera keeps Z up: the vertex with the largest z projects above the one with the
    smallest, and the two span (nearly) the whole height of the projected mesh. Opened without,
    the same scan is seen from +Z, the old behaviour, and those two vertices do not span it."""
    srv = Server("--mesh-dir", cgal_meshes())
    srv.call("session.create", {"session": "man", "mesh": "man.off", "up": "z"})
    srv.call("session.create", {"session": "man_y", "mesh": "man.off"})
    d = browser()
    try:
        for name, up in (("man", "z"), ("man_y", "y")):
            open_page(d, srv, f"session={name}")
            if d.execute_script("return deformView.grant.up") != up or d.execute_script("return deformView.up") != up:
                fail(f"session {name}: WELCOME's up option or the camera's axis is not {up}")
            p = page_positions(d)
            n = len(p) // 3
            top = max(range(n), key=lambda i: p[3 * i + 2])
            bottom = min(range(n), key=lambda i: p[3 * i + 2])
            ys = d.execute_script("return Array.from({length: arguments[0]}, (_, i) => deformView.project(i).y)", n)
            span = max(ys) - min(ys)
            yt, yb = ys[top], ys[bottom]
            print(f"{name}: up {up}; top vertex {top} at y {yt:.1f}, bottom {bottom} at y {yb:.1f}, mesh spans {span:.1f} px")
            shot(d, f"up-{name}.png")
            if up == "z" and not (yt < yb and yb - yt >= 0.9 * span):
                fail(f"the Z-up scan is not upright: top vertex at y {yt:.1f}, bottom at {yb:.1f} (span {span:.1f})")
            if up == "y" and yb - yt >= 0.9 * span:
                fail("without up the scan already looked upright: the test would not tell")
            check_numpad_views(d, up, p, n)
    finally:
        d.quit()
        srv.stop()


def test_the_page_darkens_what_its_authors_mask_holds_and_nothing_else():
    """ana's mask (a disc around the nose tip painted over JSON-RPC) reaches ana's page as a MASK
    frame (capability "mask"): the canvas darkens, and every changed pixel is darker and near the
    projection of a held vertex; the page's mask equals mask.get's. Its Ctrl+I inverts it."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv, "session=demo&author=ana")
        drawn = "return deformView.maskFrames >= 1 && deformView.maskDrawn === deformView.maskFrames && deformView.maskHeld === arguments[0]"
        wait_for("the page's first mask (empty)", lambda: d.execute_script(drawn, 0))
        w, h, bpp, a = canvas_pixels(d)
        pos = d.execute_script("return Array.from(deformView.positions())")
        tip = pos[3 * 20400:3 * 20400 + 3]
        srv.call("hello", {"author": "ana"})
        srv.call("mask.stroke", {"session": "demo", "radius": 0.02, "falloff": "constant",
                                 "samples": [{"center": tip}]})
        got = srv.call("mask.get", {"session": "demo"})
        wait_for("the page's mask, drawn", lambda: d.execute_script(drawn, len(got["vertices"])))
        _, _, _, b = canvas_pixels(d)
        shot(d, "page-mask.png")
        page_mask = d.execute_script("return Array.from(deformView.mask)")
        nonzero = [i for i, m in enumerate(page_mask) if m > 0]
        if nonzero != got["vertices"] or [page_mask[i] for i in nonzero] != got["values"]:
            fail("the page's mask differs from mask.get's")
        px = canvas_projection(d)

        cell, reach = 4, 6
        near = set()
        for i in nonzero:
            q = px(pos[3 * i:3 * i + 3])
            cx, cy = int(q[0] // cell), int(q[1] // cell)
            for dx in range(-reach // cell - 1, reach // cell + 2):
                for dy in range(-reach // cell - 1, reach // cell + 2):
                    near.add((cx + dx, cy + dy))
        changed = far = lighter = 0
        for y in range(h):
            for x in range(w):
                o = (y * w + x) * bpp
                if max(abs(a[o + k] - b[o + k]) for k in range(3)) > 8:
                    changed += 1
                    far += (x // cell, y // cell) not in near
                    lighter += sum(b[o:o + 3]) > sum(a[o:o + 3])  # (a highlight's white is not darkened)
        print(f"{len(nonzero)} vertices masked; {changed} pixels changed, {far} away from them, {lighter} lighter")
        if changed < 100:
            fail(f"only {changed} pixels changed")
        if far or lighter:
            fail(f"{far} pixels changed away from the mask, {lighter} lighter")
        d.find_element(By.TAG_NAME, "body").send_keys("\ue009i")  # Ctrl+I: the page inverts its mask
        want = len(pos) // 3 - len(nonzero)
        wait_for("the inverted mask in the page", lambda: d.execute_script(drawn, want))
        inv = srv.call("mask.get", {"session": "demo"})
        if len(inv["vertices"]) != want:
            fail(f"Ctrl+I left {len(inv['vertices'])} vertices masked, not {want}")
    finally:
        d.quit()
        srv.stop()


def write_quadrant_quad(folder):
    """A square of side 2 facing +Z with UVs 0..1 and an MTL whose map_Kd is a 64 x 64 TGA of four
    quadrants: the image's top left red, top right green, bottom left blue, bottom right yellow
    (tests/viewer/test_view.c draws the same in deform-view)."""
    rgb = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]
    px = bytearray()
    for y in range(64):
        for x in range(64):
            r, g, b = rgb[(y >= 32) * 2 + (x >= 32)]
            px += bytes((b, g, r, 255))
    head = bytes([0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 64, 0, 32, 0x28])  # 32 bits, row 0 the top
    with open(os.path.join(folder, "quadrants.tga"), "wb") as f:
        f.write(head + bytes(px))
    with open(os.path.join(folder, "quad.mtl"), "w") as f:
        f.write("newmtl quad\nKd 1 1 1\nmap_Kd quadrants.tga\n")
    with open(os.path.join(folder, "quad.obj"), "w") as f:
        f.write("mtllib quad.mtl\nv -1 -1 0\nv 1 -1 0\nv 1 1 0\nv -1 1 0\nvt 0 0\nvt 1 0\nvt 1 1\nvt 0 1\n"
                "vn 0 0 1\nusemtl quad\nf 1/1/1 2/2/1 3/3/1\nf 1/1/1 3/3/1 4/4/1\n")


def test_the_page_draws_a_texture_where_its_uvs_put_it_and_spider_obj_with_its_own():
    """The page asks for "texture": a square whose texture has four coloured quadrants shows each
    quadrant's colour where the centre of that quadrant of the square projects (the image's top
    row at v = 1, as deform-view); spider.obj brings its MTL's four JPEGs in five TEXTURE frames,
    once, and draws them (shot page-spider.png)."""
    folder = tempfile.mkdtemp(prefix="quad-", dir=TMP)
    write_quadrant_quad(folder)
    srv = Server("--mesh-dir", folder, "--mesh-dir", "/usr/share/assimp/models")
    srv.call("session.create", {"session": "quad", "mesh": "quad.obj"})
    srv.call("session.create", {"session": "spider", "mesh": "OBJ/spider.obj"})
    d = browser()
    ready = "return deformView.texturesReady && deformView.texturesDrawn === deformView.textureFrames"
    try:
        open_page(d, srv, "session=quad")
        wait_for("the quad's texture, drawn", lambda: d.execute_script(ready))
        if d.execute_script("return deformView.textureFrames") != 2:
            fail("the quad's join brought other than MATERIALS and one IMAGE")
        w, h, bpp, a = canvas_pixels(d)
        shot(d, "page-quad.png")
        px = canvas_projection(d)

        for (u, v), want in (((0.25, 0.75), "red"), ((0.75, 0.75), "green"), ((0.25, 0.25), "blue"), ((0.75, 0.25), "yellow")):
            x, y = px((2 * u - 1, 2 * v - 1, 0))
            o = (int(y) * w + int(x)) * bpp
            r, g, b = a[o], a[o + 1], a[o + 2]
            print(f"uv ({u}, {v}) at canvas pixel ({x:.0f}, {y:.0f}): {r} {g} {b}, want {want}")
            hi = {"red": (r,), "green": (g,), "blue": (b,), "yellow": (r, g)}[want]
            lo = {"red": (g, b), "green": (r, b), "blue": (r, g), "yellow": (b,)}[want]
            if min(hi) < 100 or max(lo) * 3 > min(hi):
                fail(f"uv ({u}, {v}) is {r} {g} {b}, not {want}")
        open_page(d, srv, "session=spider")
        wait_for("spider's textures, drawn", lambda: d.execute_script(ready))
        n = d.execute_script("return deformView.textureFrames")
        if n != 5:
            fail(f"spider's join brought {n} TEXTURE frames, not MATERIALS and four images")
        time.sleep(0.3)
        shot(d, "page-spider.png")
    finally:
        d.quit()
        srv.stop()


CLIP_W, CLIP_H, CLIP_F = 48, 40, 3


def clip_texel(f, x, y, ch):
    """Frame f of the test's texture clip (as tests/viewer/test_view.c's): smooth, in [0.15, 0.85]."""
    mean = 0.35 + 0.25 * (x + y + 7.0 * ch) / (CLIP_W + CLIP_H + 14.0)
    return mean + 0.12 * math.sin(0.9 * f + 0.3 * ch) * math.cos(0.15 * x) + 0.08 * (f == 2) * math.sin(0.2 * y + ch)


def clip_frame_bilinear(f, s, t):
    """Frame f's bytes at texture coordinates (s, t) (t = 1 - v, row 0 at t = 0), bilinear."""
    fx, fy = s * CLIP_W - 0.5, t * CLIP_H - 0.5
    x0, y0 = math.floor(fx), math.floor(fy)
    out = [0.0, 0.0, 0.0]
    for j in range(4):
        x, y = x0 + (j & 1), y0 + (j >> 1)
        wt = (fx - x0 if j & 1 else 1 - (fx - x0)) * (fy - y0 if j >> 1 else 1 - (fy - y0))
        x, y = min(max(x, 0), CLIP_W - 1), min(max(y, 0), CLIP_H - 1)
        for ch in range(3):
            out[ch] += wt * round(255 * clip_texel(f, x, y, ch))
    return out


def test_the_page_draws_a_texture_clips_frame_at_the_uvs_for_two_frames():
    """The page asks for "texclip": on the quadrant quad, a texture clip following a recorded clip
    replaces the quadrants with its rebuilt frame; with ?unlit=1 each pixel at a known UV equals
    the uploaded frame there (bilinear) within the compression's reported bound + 3/255, for the
    frames at two seeks (shots page-texclip-0.png, page-texclip-2.png)."""
    import base64
    folder = tempfile.mkdtemp(prefix="clipquad-", dir=TMP)
    write_quadrant_quad(folder)
    srv = Server("--mesh-dir", folder)
    srv.call("session.create", {"session": "quad", "mesh": "quad.obj"})
    srv.call("anim.record_start", {"session": "quad", "clip": "still", "fps": 10, "max_frames": 3})
    time.sleep(0.4)
    srv.call("anim.record_stop", {"session": "quad"})
    srv.call("anim.compress", {"session": "quad", "clip": "still", "components": 1})
    frames = []
    for f in range(CLIP_F):
        head = bytes([0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, CLIP_W, 0, CLIP_H, 0, 24, 0x20])  # 24 bits, row 0 the top
        px = bytearray()
        for y in range(CLIP_H):
            for x in range(CLIP_W):
                px += bytes(round(255 * clip_texel(f, x, y, ch)) for ch in (2, 1, 0))
        frames.append(base64.b64encode(head + bytes(px)).decode())
    rep = srv.call("texclip.upload", {"session": "quad", "name": "tint", "clip": "still", "fps": 10,
                                      "max_error": 2.0 / 255, "frames": frames})
    bound = 255 * rep["max_error"] + 3
    srv.call("anim.play", {"session": "quad", "clip": "still"})
    srv.call("anim.pause", {"session": "quad"})
    d = browser()
    try:
        seen = []
        for seek in (0, 2):
            srv.call("anim.seek", {"session": "quad", "frame": seek})
            t = srv.call("anim.list", {"session": "quad"})["player"]["time"]
            f = min(CLIP_F - 1, math.floor(t * 10.0))
            open_page(d, srv, "session=quad&unlit=1")
            wait_for("the texture clip, drawn", lambda: d.execute_script(
                "return deformView.texturesReady && deformView.texclipsShown === 1 && "
                "deformView.texclipsDrawn === deformView.texclipFrames"))
            time.sleep(0.2)
            w, h, bpp, a = canvas_pixels(d)
            shot(d, f"page-texclip-{seek}.png")
            px = canvas_projection(d)
            worst, pixels = 0.0, []
            for i in range(5):
                for j in range(5):
                    u, v = 0.1 + 0.2 * i, 0.1 + 0.2 * j
                    x, y = px((2 * u - 1, 2 * v - 1, 0))
                    o = (int(y) * w + int(x)) * bpp
                    want = clip_frame_bilinear(f, u, 1 - v)
                    got = a[o:o + 3]
                    pixels.append(got)
                    worst = max(worst, *(abs(got[c] - want[c]) for c in range(3)))
            print(f"seek {seek}: texture frame {f}, worst |pixel - frame| {worst:.1f} / 255 over 25 UVs (bound {bound:.1f})")
            if worst > bound:
                fail(f"the page's texture clip is {worst:.1f} / 255 off frame {f}")
            seen.append((f, pixels))
        moved = max(abs(p[c] - q[c]) for p, q in zip(seen[0][1], seen[1][1]) for c in range(3))
        print(f"frames {seen[0][0]} and {seen[1][0]}: the pixels moved by up to {moved} / 255")
        if seen[0][0] == seen[1][0] or moved < 20:
            fail("the two seeks did not show two different frames")
    finally:
        d.quit()
        srv.stop()


class PresenceClient:
    """A stream client granted "presence" (docs/protocol.md §14, §16), written from the spec with
    struct: HELLO version 2 with the caps option and an author, then PRESENCE frames both ways."""

    def __init__(self, port, author, session="demo"):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        name, who = session.encode(), author.encode()
        caps = bytes([8]) + b"presence"
        opts = (struct.pack("<BHB", 1, 1, 0) + struct.pack("<BHf", 2, 4, 0) + struct.pack("<BHf", 3, 4, 0) +
                struct.pack("<BH", 5, len(who)) + who + struct.pack("<BH", 7, len(caps)) + caps)
        body = (struct.pack("<HBB", 2, 2, 0) + struct.pack("<H", len(name)) + name + struct.pack("<H", 0) +
                struct.pack("<H", len(opts)) + opts)
        self.sock.sendall(self.frame(1, body, version=2))
        welcome = self.read(lambda t, p: t == 2)
        self.id = struct.unpack_from("<I", welcome, 0)[0]
        self.people = {}  # id -> {"author", "flags", "state"}

    @staticmethod
    def frame(t, body, version=1):
        return b"DFMD" + struct.pack("<HBBIQ", version, t, 0, len(body), 0) + body

    def read(self, want, timeout=60.0):
        """Frames until want(type, payload) holds; returns that payload."""
        end = time.time() + timeout
        while True:
            while len(self.buf) >= 20:
                t, n = self.buf[6], struct.unpack_from("<I", self.buf, 8)[0]
                if len(self.buf) < 20 + n:
                    break
                p, self.buf = self.buf[20:20 + n], self.buf[20 + n:]
                if t == 14:
                    self.apply(p)
                if want(t, p):
                    return p
            left = end - time.time()
            if left <= 0:
                fail("timed out reading frames")
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                fail("the server closed the connection")
            self.buf += chunk

    def apply(self, p):
        at = 0
        while at < len(p):
            kind = p[at]
            at += 1
            if kind == 1:  # INFO
                rid, role, client, flags, idle, n = struct.unpack_from("<IBBBIH", p, at)
                at += 13
                self.people.setdefault(rid, {"state": None}).update(author=p[at:at + n].decode(), flags=flags)
                at += n
            elif kind == 2:  # LEAVE
                self.people.pop(struct.unpack_from("<I", p, at)[0], None)
                at += 4
            elif kind == 3:  # STATE
                rid, flags, tool = struct.unpack_from("<IBB", p, at)
                v = struct.unpack_from("<14f", p, at + 6)
                at += 62
                if rid in self.people:
                    self.people[rid]["state"] = {"flags": flags, "tool": tool, "hit": list(v[0:3]), "normal": list(v[3:6]),
                                                 "radius": v[6], "eye": list(v[7:10]), "target": list(v[10:13]), "fov": v[13]}
            elif kind == 4:  # CLEAR
                self.people = {}
            else:
                fail(f"a PRESENCE record of kind {kind}")

    def send_state(self, hit, eye, target, fov, radius=0.02, tool=3):
        body = struct.pack("<BIBB", 3, 0, 3, tool) + struct.pack("<14f", *hit, 0, 0, 1, radius, *eye, *target, fov)
        self.sock.sendall(self.frame(14, body))

    def find(self, author):
        return next((i for i, q in self.people.items() if q.get("author") == author), None)

    def close(self):
        self.sock.close()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def author_colour(name):
    """An author's colour (docs/protocol.md §15.4), computed here a third time: FNV-1a 32 of the
    name, mod 360 a hue, value 230 and chroma 161 in integers."""
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    hue = h % 360
    sector, f = hue // 60, hue % 60
    base, top = 230 - 161, 230
    mid = base + (161 * f // 60 if sector % 2 == 0 else 161 * (60 - f) // 60)
    order = [[0, 1, 2], [1, 0, 2], [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1]][sector]
    rgb = [0, 0, 0]
    rgb[order[0]], rgb[order[1]], rgb[order[2]] = top, mid, base
    return rgb


def start_redis():
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    n = port.getsockname()[1]
    port.close()
    d = tempfile.mkdtemp(prefix="redis-", dir=TMP)
    p = subprocess.Popen(["redis-server", "--port", str(n), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            socket.create_connection(("127.0.0.1", n)).close()
            return True
        except OSError:
            return False
    wait_for("redis-server", up, 20)
    return p, f"redis://127.0.0.1:{n}"


def test_a_page_on_a_relay_and_a_client_on_the_primary_see_each_others_cursors_and_the_page_follows():
    """A page served by a relay and a stream client on the primary (one session, presence over
    Redis): each gets the other's cursor and camera exactly as sent (float32), the page draws the
    client's cursor in its author's colour (the colour computed here from its name), follows its
    camera within one animation frame, and is told when it leaves."""
    redis, url = start_redis()
    common = ["--redis", url, "--lease-ms", "1000", "--redis-timeout-ms", "1000"]
    srv = Server(*common)
    relay = Server("--relay", "--hello-timeout-ms", "60000", *common, demo=False)
    d = browser(800, 600)
    ana = None
    try:
        wait_for("the relay's registry lists demo",
                 lambda: any(s.get("session") == "demo" for s in relay.call("server.stats").get("cluster", {}).get("sessions", [])), 60)
        ana = PresenceClient(srv.stream, "ana")
        open_page(d, relay, "session=demo&author=pat")
        wait_for("the page joined with presence", lambda: d.execute_script(
            "return deformView.connected && deformView.grant.caps.includes('presence')"))
        # ana hears of pat (through Redis), pat of ana.
        ana.read(lambda t, p: ana.find("pat") is not None)
        wait_for("ana in the page", lambda: d.execute_script("return deformView.presence.people.some((q) => q.author === 'ana')"))
        # ana's cursor on vertex 20400 as the page holds it, her camera somewhere else.
        pos = d.execute_script("return Array.from(deformView.positions().slice(3 * 20400, 3 * 20400 + 3))")
        eye, target, fov = [0.3, 0.1, 0.8], [0.0, 0.05, 0.0], 0.7
        t0 = time.time()
        ana.send_state(pos, eye, target, fov)
        got = wait_for("ana's cursor in the page", lambda: d.execute_script(
            "const q = deformView.presence.people.find((q) => q.author === 'ana'); return q && q.state"), 60, 0.002)
        print(f"ana's cursor reached the page through the relay in {1000 * (time.time() - t0):.1f} ms (polled)")
        for k in range(3):
            if got["hit"][k] != f32(pos[k]) or got["eye"][k] != f32(eye[k]) or got["target"][k] != f32(target[k]):
                fail(f"the page holds ana's state {got}, she sent {pos} {eye} {target}")
        if got["fov"] != f32(fov):
            fail("the field of view differs")
        # The page draws her cursor where the vertex projects, in her colour.
        want = author_colour("ana")
        if d.execute_script("return deformView.presence.people.find((q) => q.author === 'ana').rgb") != want:
            fail("the page's colour for ana is not the one her name hashes to")
        at = d.execute_script("return deformView.project(20400)")
        def drawn():
            px = d.execute_script("return deformView.overlayPixel(arguments[0], arguments[1])", at["x"], at["y"])
            return px[3] > 200 and all(abs(px[k] - want[k]) <= 2 for k in range(3))
        wait_for("ana's cursor drawn in her colour", drawn, 30)
        # pat's cursor, over the middle of the canvas: ana gets exactly what the page sent.
        sent = d.execute_script("const c = document.getElementById('view').getBoundingClientRect(); "
                                "return deformView.presenceMove(c.width / 2, c.height / 2)")
        if not sent or not (sent["flags"] & 1):
            fail(f"the page had no cursor over the mesh to send: {sent}")
        pat = ana.find("pat")
        ana.read(lambda t, p: (ana.people.get(pat) or {}).get("state") and
                 all(ana.people[pat]["state"]["hit"][k] == f32(sent["hit"][k]) for k in range(3)))
        if not ana.people[pat]["flags"] & 4:
            fail("pat, on the relay, is not flagged remote on the primary")
        # Follow: one animation frame later the page's camera is ana's.
        ana_id = d.execute_script("return deformView.presence.people.find((q) => q.author === 'ana').id")
        pose = d.execute_async_script(
            "const done = arguments[1]; deformView.follow(arguments[0]); "
            "requestAnimationFrame(() => done(deformView.cameraPose()));", ana_id)
        for k in range(3):
            if abs(pose["eye"][k] - f32(eye[k])) > 1e-6 or pose["target"][k] != f32(target[k]):
                fail(f"following ana, the page's camera is {pose}, hers {eye} {target}")
        if pose["fov"] != f32(fov):
            fail("following ana, the page's field of view is not hers")
        ana.close()
        ana = None
        wait_for("the page told ana left", lambda: "ana left" in d.execute_script("return deformView.presence.notices"), 30)
        if d.execute_script("return deformView.presence.following") != 0:
            fail("the page still follows a participant who left")
        shot(d, "presence.png")
    finally:
        if ana:
            ana.close()
        d.quit()
        relay.stop()
        srv.stop()
        redis.kill()
        redis.wait()



def test_the_pages_texture_clip_pass_equals_the_c_reference_within_1_255():
    """viewer/web/texclip.js's WebGL2 pass (TEXTURE_2D_ARRAY, fragment shader) on SwiftShader
    rebuilds the frame of the C fixture (tests/web/write_fixtures.c: a clip of three windows laid
    out and quantised by shared/mesh_texpca.c, its TEXCLIP and TEXWEIGHTS frames) as the C
    reference's mesh_texclip_frame_rgb8 does, within 1/255 per channel."""
    out = os.path.join(TMP, "fixtures")
    os.makedirs(out, exist_ok=True)
    subprocess.run([os.path.join(BUILD, "tests", "web-fixtures"), out], check=True)
    with open(os.path.join(out, "fixtures.jsonl")) as f:
        fx = next(json.loads(line) for line in f if '"texclip_rebuild"' in line)
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        r = d.execute_async_script("""
            const [clipHex, wHex, done] = arguments;
            const b = (h) => Uint8Array.from(h.match(/../g), (x) => parseInt(x, 16));
            Promise.all([import('/texclip.js'), import('/protocol.js')]).then(([TC, P]) => {
              const clip = TC.decodeTexclip(P.splitFrame(b(clipHex)).payload);
              const [e] = TC.decodeTexweights(P.splitFrame(b(wHex)).payload);
              const gl = document.createElement('canvas').getContext('webgl2');
              const pass = new TC.TexclipPass(gl, clip);
              pass.draw(e);
              const px = pass.read();
              done({px: Array.from(px), w: clip.width, h: clip.height, err: gl.getError(),
                    renderer: gl.getParameter(gl.RENDERER)});
            }).catch((e) => done({error: String(e)}));""", fx["clip"], fx["weights"])
        if "error" in r:
            fail(f"the page's texture clip pass: {r['error']}")
        if r["err"] != 0:
            fail(f"GL error {r['err']} after the texture clip pass")
        want = bytes.fromhex(fx["rgb"])
        px = r["px"]
        n = r["w"] * r["h"]
        if len(want) != 3 * n or len(px) != 4 * n:
            fail(f"sizes: {len(want)} reference bytes, {len(px)} read back for {n} texels")
        diffs = [abs(px[4 * i + c] - want[3 * i + c]) for i in range(n) for c in range(3)]
        print(f"renderer {r['renderer']}: worst {max(diffs)}/255, {diffs.count(0)} of {len(diffs)} channels exact")
        if max(diffs) > 1:
            fail(f"the page's rebuild differs from the C reference by {max(diffs)}/255")
        if diffs.count(0) < len(diffs) * 0.9:
            fail("fewer than 90% of the channels equal the C reference exactly")
    finally:
        d.quit()
        srv.stop()

TESTS = {name[5:]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(TESTS))
        sys.exit(0)
    BUILD = sys.argv[1]
    SHOTS = os.environ.get("WEB_SHOTS")
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
    t0 = time.time()
    TESTS[sys.argv[2]]()
    print(f"passed in {time.time() - t0:.1f} s")
