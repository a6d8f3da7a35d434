#!/usr/bin/python3
"""test_tools.py BUILD_DIR TEST — the browser page's sculpting tools (issue 26) in headless
Chromium against a live deformd, with test_page.py's server, browser and oracles. Each TEST is one
ctest test (tests/CMakeLists.txt); `test_tools.py BUILD_DIR --list` names them.

Oracles: the page's positions checked against the C replica (deformctl watch --dump) and the
camera's own matrices (where every vertex in view lies against the near plane); the CPU ray cast
over every triangle (camera.js pick) for the GPU pick; the server's sculpt layer (sculpt.get) for
what a stroke did, against the page's normals from before it; JSON-RPC for sessions and history.
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_page as T  # noqa: E402
from test_page import Server, browser, fail, open_page, page_at, wait_for  # noqa: E402

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.actions.action_builder import ActionBuilder  # noqa: E402
from selenium.webdriver.common.actions.interaction import POINTER_MOUSE, POINTER_PEN  # noqa: E402
from selenium.webdriver.common.actions.mouse_button import MouseButton  # noqa: E402
from selenium.webdriver.common.actions.pointer_input import PointerInput  # noqa: E402
from selenium.webdriver.common.actions.wheel_input import ScrollOrigin  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402


def view_of(d):
    """The page's camera: mvp, view matrix (column-major), canvas size, depth range, pixel ratio."""
    return d.execute_script("return Object.assign(deformView.camera(), {view: deformView.view, clip: deformView.clip})")


def project(cam, p):
    m = cam["mvp"]
    x = m[0] * p[0] + m[4] * p[1] + m[8] * p[2] + m[12]
    y = m[1] * p[0] + m[5] * p[1] + m[9] * p[2] + m[13]
    w = m[3] * p[0] + m[7] * p[1] + m[11] * p[2] + m[15]
    return x / w, y / w, w


def nearest_in_view(cam, flat):
    """The view depth of the nearest vertex inside the frustum's sides (None: none in view)."""
    v = cam["view"]
    best = None
    for i in range(0, len(flat), 3):
        p = flat[i:i + 3]
        depth = -(v[2] * p[0] + v[6] * p[1] + v[10] * p[2] + v[14])
        if depth <= 0:
            continue
        x, y, _ = project(cam, p)
        if -1 <= x <= 1 and -1 <= y <= 1 and (best is None or depth < best):
            best = depth
    return best


def press(d, key):
    """A key pressed with the focus where it is (the page's body: nothing clicked first)."""
    ActionChains(d).send_keys(key).perform()


def canvas_origin(d):
    return d.find_element(By.ID, "view")


def css_of_vertex(d, v):
    return d.execute_script("return deformView.project(arguments[0])", v)


def sculpt_offsets(srv):
    return {int(k): v for k, v in srv.call("sculpt.get", {"session": "demo"})["offsets"].items()}


def wait_sculpted(srv, before):
    return wait_for("the stroke to reach the server", lambda: srv.version() > before, 30)


def pen_click(d, x, y, pressure, keys=()):
    """A pen touching the canvas at CSS pixel (x, y) of the viewport with this pressure, lifted
    without moving: a stroke of one point (one dab)."""
    pen = PointerInput(POINTER_PEN, "pen")
    a = ActionBuilder(d, mouse=pen)
    a.pointer_action.move_to_location(int(x), int(y))
    a.pointer_action.pointer_down(pressure=pressure)
    a.pointer_action.pause(0.05)
    a.pointer_action.pointer_up()
    a.perform()


def viewport_xy(d, css):
    r = d.find_element(By.ID, "view").rect
    return r["x"] + css["x"], r["y"] + css["y"]


def page_in_view(d, srv, key, axis, name):
    """Opens the page; the shape deformctl holds (written to `name`) and the page's positions;
    then the numpad view `key`, once the eye looks from +axis."""
    open_page(d, srv)
    verts, tris = T.dump(srv, name)
    flat = T.page_positions(d)
    press(d, key)
    wait_for("the view", lambda: d.execute_script(f"return deformView.eyeDirection[{axis}] > 0.99"), 10)
    return verts, tris, flat


# ---- tests --------------------------------------------------------------------------------------

def test_zooming_toward_the_ear_in_the_page_never_puts_the_near_plane_inside_the_mesh():
    """The right view (numpad 3), the pointer over the ear (the vertex farthest along +x), wheel
    notches toward it until the clamp has refused three (at most eighty): after each one every
    vertex inside the frustum's sides lies beyond the near plane (the camera's own matrices, the page's positions, equal to deformctl's), the camera
    ends within a tenth of its first distance of the ear, the wheel's clamp refused the last steps,
    and the ear stays under the pointer."""
    srv = Server()
    d = browser()
    try:
        verts, _, flat = page_in_view(d, srv, Keys.NUMPAD3, 0, "zoom.obj")
        if not T.max_error(flat, verts) <= 1e-5 * T.diagonal(verts):
            fail("the page's positions are not deformctl's")
        ear = max(range(len(verts)), key=lambda i: verts[i][0])
        canvas = canvas_origin(d)
        e = css_of_vertex(d, ear)
        ox, oy = int(e["x"] - canvas.size["width"] / 2), int(e["y"] - canvas.size["height"] / 2)
        ActionChains(d).move_to_element_with_offset(canvas, ox, oy).perform()

        def ear_distance():
            pose = d.execute_script("return deformView.cameraPose()")
            return math.dist(pose["eye"], verts[ear])

        d0 = ear_distance()
        for notch in range(80):
            if d.execute_script("return deformView.zoomClamped") >= 3:
                break
            ActionChains(d).scroll_from_origin(ScrollOrigin.from_element(canvas, ox, oy), 0, -100).perform()
            cam = view_of(d)
            near = nearest_in_view(cam, flat)
            if near is not None and not cam["clip"]["near"] < near:
                fail(f"notch {notch + 1}: the near plane at {cam['clip']['near']:.5g} cuts the mesh (a vertex in view at depth {near:.5g})")
        d1 = ear_distance()
        clamped = d.execute_script("return deformView.zoomClamped")
        under = d.execute_script("return deformView.cpuPickAt(arguments[0], arguments[1])", e["x"], e["y"])
        print(f"eye to ear {d0:.4f} -> {d1:.4f}; near plane {cam['clip']['near']:.5g}, nearest vertex in view {near:.5g}; "
              f"{clamped} notches refused; under the pointer: {under and math.dist(under['point'], verts[ear]):.4g} from the ear")
        if not d1 < 0.1 * d0:
            fail(f"the wheel brought the eye only from {d0:.4f} to {d1:.4f} of the ear")
        if clamped < 1:
            fail("the clamp never held the zoom back")
        if not under or math.dist(under["point"], verts[ear]) > 0.02 * T.diagonal(verts):
            fail("the zoom did not keep the ear under the pointer")
        T.shot(d, "page-zoom-ear.png")
    finally:
        d.quit()
        srv.stop()


def test_pan_moves_the_view_not_the_shape_and_middle_drag_orbits_about_the_point_under_it():
    """Shift + middle drag by (60, 40) CSS pixels: every vertex's pixel moves by that much (the
    nose tip's within a pixel), the way the camera looks stays, the shape and the session's
    version do not change. Then a middle drag over the nose tip orbits: the camera turns and the
    nose tip keeps its pixel (the pivot is the point under the cursor)."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        d.execute_script("deformView.setMode('brush')")  # middle drags navigate in every mode
        v0 = srv.version()
        before = T.page_positions(d)
        look0 = d.execute_script("return deformView.eyeDirection")
        canvas = canvas_origin(d)
        nose = css_of_vertex(d, 20400)
        ox, oy = int(nose["x"] - canvas.size["width"] / 2), int(nose["y"] - canvas.size["height"] / 2)
        mouse = PointerInput(POINTER_MOUSE, "mouse")
        a = ActionBuilder(d, mouse=mouse)
        a.key_action.key_down(Keys.SHIFT)
        a.pointer_action.move_to(canvas, ox, oy).pointer_down(MouseButton.MIDDLE)
        for k in range(1, 5):
            a.pointer_action.move_to(canvas, ox + 15 * k, oy + 10 * k)
        a.pointer_action.pointer_up(MouseButton.MIDDLE)
        a.key_action.key_up(Keys.SHIFT)
        a.perform()
        after = css_of_vertex(d, 20400)
        far = css_of_vertex(d, 0)
        look1 = d.execute_script("return deformView.eyeDirection")
        print(f"nose tip {nose['x']:.1f},{nose['y']:.1f} -> {after['x']:.1f},{after['y']:.1f}; view direction moved by "
              f"{math.dist(look0, look1):.2g}")
        if abs(after["x"] - nose["x"] - 60) > 1 or abs(after["y"] - nose["y"] - 40) > 1:
            fail(f"a pan of (60, 40) moved the nose tip by ({after['x'] - nose['x']:.1f}, {after['y'] - nose['y']:.1f})")
        if math.dist(look0, look1) > 1e-6:
            fail("the pan turned the camera")
        if T.page_positions(d) != before or srv.version() != v0:
            fail("the pan changed the shape")
        if far["depth"] >= 1:
            fail("vertex 0 left the view")
        # Orbit about the nose tip: it stays under the cursor while the camera turns.
        nose = after
        ox, oy = int(nose["x"] - canvas.size["width"] / 2), int(nose["y"] - canvas.size["height"] / 2)
        a = ActionBuilder(d, mouse=PointerInput(POINTER_MOUSE, "mouse"))
        a.pointer_action.move_to(canvas, ox, oy).pointer_down(MouseButton.MIDDLE)
        for k in range(1, 5):
            a.pointer_action.move_to(canvas, ox + 20 * k, oy)
        a.pointer_action.pointer_up(MouseButton.MIDDLE)
        a.perform()
        turned = css_of_vertex(d, 20400)
        look2 = d.execute_script("return deformView.eyeDirection")
        print(f"orbit: the view direction turned by {math.dist(look1, look2):.3f}, the nose tip moved "
              f"{math.hypot(turned['x'] - nose['x'], turned['y'] - nose['y']):.2f} px")
        if math.dist(look1, look2) < 0.3:
            fail("a middle drag of 80 px did not orbit")
        if math.hypot(turned["x"] - nose["x"], turned["y"] - nose["y"]) > 3:
            fail("the orbit did not keep the point under the cursor in place")
        if srv.version() != v0:
            fail("the orbit edited the shape")
    finally:
        d.quit()
        srv.stop()


def eye_inside(verts, tris, p):
    """Whether p is inside the closed mesh: the parity of the triangles a ray from p straight
    up +z crosses (a direction of its own, not the page's), in the plane's 2D terms."""
    n = 0
    px, py, pz = p
    for a, b, c in tris:
        A, B, C = verts[a], verts[b], verts[c]
        if px < min(A[0], B[0], C[0]) or px > max(A[0], B[0], C[0]) or py < min(A[1], B[1], C[1]) or py > max(A[1], B[1], C[1]):
            continue
        det = (B[0] - A[0]) * (C[1] - A[1]) - (C[0] - A[0]) * (B[1] - A[1])
        if det == 0:
            continue
        u = ((px - A[0]) * (C[1] - A[1]) - (C[0] - A[0]) * (py - A[1])) / det
        v = ((B[0] - A[0]) * (py - A[1]) - (px - A[0]) * (B[1] - A[1])) / det
        if u < 0 or v < 0 or u + v > 1:
            continue
        if A[2] + u * (B[2] - A[2]) + v * (C[2] - A[2]) > pz:
            n += 1
    return n % 2 == 1


def test_orbit_and_pan_in_the_page_never_put_the_camera_inside_the_mesh():
    """Zoomed onto the cheek until the wheel's clamp holds, middle drags orbit about the cheek
    (half a turn and more: unclamped, the eye would swing through the head) and Shift + middle
    drags pan every way: after each drag the eye is outside the head (a ray cast here, the
    parity of the triangles it crosses) and no vertex in view is nearer than the near plane; the
    clamp refused some steps."""
    srv = Server()
    d = browser()
    try:
        verts, tris, flat = page_in_view(d, srv, Keys.NUMPAD1, 2, "nav.obj")
        nose = verts[20400]
        cheek = max((i for i in range(len(verts)) if abs(verts[i][0] - nose[0] - 0.035) < 0.004 and abs(verts[i][1] - nose[1]) < 0.004),
                    key=lambda i: verts[i][2])
        canvas = canvas_origin(d)
        e = css_of_vertex(d, cheek)
        ox, oy = int(e["x"] - canvas.size["width"] / 2), int(e["y"] - canvas.size["height"] / 2)
        ActionChains(d).move_to_element_with_offset(canvas, ox, oy).perform()
        for _ in range(80):
            if d.execute_script("return deformView.zoomClamped") >= 2:
                break
            ActionChains(d).scroll_from_origin(ScrollOrigin.from_element(canvas, ox, oy), 0, -100).perform()
        look0 = d.execute_script("return deformView.eyeDirection")
        turned = 0

        def drag(dx, dy, shift):
            a = ActionBuilder(d, mouse=PointerInput(POINTER_MOUSE, "mouse"))
            if shift:
                a.key_action.key_down(Keys.SHIFT)
            a.pointer_action.move_to(canvas, ox, oy).pointer_down(MouseButton.MIDDLE)
            for k in range(1, 4):
                a.pointer_action.move_to(canvas, ox + dx * k // 3, oy + dy * k // 3)
            a.pointer_action.pointer_up(MouseButton.MIDDLE)
            if shift:
                a.key_action.key_up(Keys.SHIFT)
            a.perform()
            eye = d.execute_script("return deformView.cameraPose()")["eye"]
            cam = view_of(d)
            near = nearest_in_view(cam, flat)
            what = f"after a {'pan' if shift else 'orbit'} of ({dx}, {dy})"
            if eye_inside(verts, tris, eye):
                fail(f"{what} the eye {eye} is inside the head")
            if near is not None and not cam["clip"]["near"] < near:
                fail(f"{what} the near plane at {cam['clip']['near']:.5g} cuts the mesh (a vertex in view at {near:.5g})")

        for _ in range(8):  # 8 x 60 px: 3.8 radians about the cheek
            drag(60, 0, False)
            turned = max(turned, math.dist(look0, d.execute_script("return deformView.eyeDirection")))
        orbit_clamped = d.execute_script("return deformView.navClamped")
        for dx, dy in ((80, 0), (-80, 0), (0, 80), (0, -80)):
            for _ in range(2):
                drag(dx, dy, True)
        clamped = d.execute_script("return deformView.navClamped")
        print(f"orbit: the view turned by up to {turned:.3f}, {orbit_clamped} orbit steps refused; {clamped - orbit_clamped} pan steps refused")
        if turned < 0.05:
            fail("the orbit did not turn the camera at all")
        if orbit_clamped < 1:
            fail("half a turn about the cheek at the closest zoom was never held back")
        T.shot(d, "page-orbit-clamped.png")
    finally:
        d.quit()
        srv.stop()


def test_the_gpu_pick_at_a_pixel_equals_the_cpu_ray_cast():
    """A 9 × 7 grid of pixels over the head, from the front and after an orbit: where the CPU ray
    cast over every triangle hits, the GPU pick hits the same vertex (a different one only where
    the point is halfway along an edge: its two largest barycentric weights within 2e-3), at a
    point under the pixel (within a quarter pixel) and as far along the ray (within a quarter
    of the pixel's footprint, over the cosine of the ray's angle to the surface); where it
    misses, the GPU misses too."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        verts, _ = T.dump(srv, "pick.obj")
        diag = T.diagonal(verts)
        flat = T.page_positions(d)
        hits = same = ties = misses = 0
        worst = 0.0
        fov = d.execute_script("return deformView.cameraPose().fov")
        for view in ("front", "orbit"):
            if view == "orbit":
                press(d, Keys.NUMPAD3)
                wait_for("the side view", lambda: d.execute_script("return deformView.eyeDirection[0] > 0.99"), 10)
            w, h = d.execute_script("const c = document.getElementById('view'); return [c.clientWidth, c.clientHeight]")
            eye = d.execute_script("return deformView.cameraPose().eye")
            cam = view_of(d)
            for gy in range(7):
                for gx in range(9):
                    x, y = w * (0.36 + 0.28 * gx / 8) + 0.37, h * (0.08 + 0.84 * gy / 6) + 0.29
                    g = d.execute_script("return deformView.pickAt(arguments[0], arguments[1])", x, y)
                    c = d.execute_script("return deformView.cpuPickAt(arguments[0], arguments[1])", x, y)
                    if c is None:
                        misses += 1
                        if g is not None:
                            fail(f"({x:.1f}, {y:.1f}): the GPU hit vertex {g['vertex']} where the ray misses")
                        continue
                    hits += 1
                    if g is None:
                        fail(f"({x:.1f}, {y:.1f}): the GPU missed where the ray hits vertex {c['vertex']}")
                    # The GPU's point lies under the pixel (within a quarter pixel), as far along the
                    # ray as the CPU's within a quarter of the pixel's footprint there, stretched
                    # by how obliquely the ray meets the surface.
                    gx_, gy_, _ = project(cam, g["point"])
                    off = math.hypot((gx_ + 1) / 2 * w - x, (1 - gy_) / 2 * h - y)
                    ray = [c["point"][k] - eye[k] for k in range(3)]
                    lr = math.sqrt(sum(r * r for r in ray))
                    cos = abs(sum(ray[k] * g["normal"][k] for k in range(3))) / lr
                    tol = 0.25 * lr * 2 * math.tan(fov / 2) / h / max(cos, 0.05)
                    along = abs(math.dist(eye, g["point"]) - lr)
                    worst = max(worst, off / 0.25, along / tol)
                    if off > 0.25 or along > tol:
                        fail(f"({x:.1f}, {y:.1f}): GPU point {g['point']} ({off:.2f} px off the pixel, {along:.3g} along "
                             f"the ray) against {c['point']}")
                    if g["vertex"] == c["vertex"]:
                        same += 1
                        continue
                    # A near tie: the point lies halfway along an edge (its two largest barycentric
                    # weights within 2e-3), whose two ends the rounding may pick either of.
                    top = sorted(g["bary"], reverse=True)
                    if top[0] - top[1] > 2e-3:
                        fail(f"({x:.1f}, {y:.1f}): GPU vertex {g['vertex']} (weights {g['bary']}), CPU vertex {c['vertex']}")
                    ties += 1
        print(f"{hits} hits ({same} the same vertex, {ties} near ties), {misses} misses; "
              f"points apart by at most {worst:.2f} of the tolerance")
        if hits < 40 or misses < 5:
            fail("the grid should both hit and miss the head")
    finally:
        d.quit()
        srv.stop()


def single_dab(d, srv, css, pressure, keys=()):
    """One pen dab at a CSS point of the canvas; returns the sculpt layer afterwards."""
    v = srv.version()
    x, y = viewport_xy(d, css)
    if keys:
        ActionChains(d).key_down(keys[0]).perform()
    pen_click(d, x, y, pressure)
    if keys:
        ActionChains(d).key_up(keys[0]).perform()
    wait_sculpted(srv, v)
    return sculpt_offsets(srv)


def test_pen_pressure_scales_strength_or_radius_as_the_pressure_menu_says():
    """Draw brush, one pen dab on the cheek at pressure 1.0 and at 0.2 (undone in between):
    mapped to strength, the largest offset at 0.2 is a fifth of 1.0's (within 0.15–0.25) and the
    sent strength is 0.2 × the slider's; mapped to radius, every vertex the 0.2 dab moved lies
    within 0.2 × the radius of its centre (and some beyond 0.1 ×); mapped to none, 0.2 and 1.0
    do the same. The history panel then lists the dabs with the page's author."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv, "session=demo&author=penny")
        d.execute_script("deformView.setMode('brush')")
        d.execute_script("document.getElementById('front').checked = false")
        nose = css_of_vertex(d, 20400)
        spot = {"x": nose["x"] - 45, "y": nose["y"] + 15}
        results = {}
        for mapping in ("strength", "radius", "none"):
            d.execute_script("document.getElementById('pressure').value = arguments[0]", mapping)
            for p in (1.0, 0.2):
                off = single_dab(d, srv, spot, p)
                last = d.execute_script("return deformView.lastStroke")
                results[(mapping, p)] = (off, last)
                d.execute_script("return deformView.undo()")
                wait_for("the undo", lambda: not sculpt_offsets(srv), 30)
        biggest = {k: max(math.sqrt(sum(c * c for c in o)) for o in off.values()) for k, (off, _) in results.items()}
        s1, s02 = biggest[("strength", 1.0)], biggest[("strength", 0.2)]
        print(f"strength mapping: largest offset {s1:.3g} at 1.0, {s02:.3g} at 0.2 (ratio {s02 / s1:.3f}); "
              f"none: {biggest[('none', 1.0)]:.3g} and {biggest[('none', 0.2)]:.3g}")
        if not 0.15 <= s02 / s1 <= 0.25:
            fail(f"pressure 0.2 mapped to strength gave {s02 / s1:.3f} of the full dab")
        st1, st02 = results[("strength", 1.0)][1]["last"]["strength"], results[("strength", 0.2)][1]["last"]["strength"]
        if abs(st02 - 0.2 * st1) > 1e-6:
            fail(f"the sent strengths were {st1} and {st02}")
        if abs(biggest[("none", 1.0)] - biggest[("none", 0.2)]) > 1e-6 * s1:
            fail("with no mapping the pressure still changed the dab")
        verts, _ = T.dump(srv, "pressure.obj")
        r1 = results[("radius", 1.0)][1]["last"]["radius"]
        r02 = results[("radius", 0.2)][1]["last"]["radius"]
        centre = results[("radius", 0.2)][1]["last"]["center"]
        reach = max(math.dist(verts[i], centre) for i in results[("radius", 0.2)][0])
        print(f"radius mapping: sent radius {r1:.4g} and {r02:.4g}; the 0.2 dab moved vertices up to {reach:.4g} from its centre")
        if abs(r02 - 0.2 * r1) > 1e-6 * r1:
            fail(f"the sent radii were {r1} and {r02}")
        if not 0.1 * r1 < reach <= 0.2 * r1 * 1.02:
            fail(f"the 0.2 dab moved vertices {reach:.4g} from its centre (radius {r1:.4g})")
        d.find_element(By.ID, "history-button").click()
        rows = wait_for("the history panel", lambda: d.execute_script(
            "return Array.from(document.querySelectorAll('#history-list .who')).map((e) => e.textContent)") or None, 20)
        print(f"history: {rows[:3]}")
        if not any("penny" in r for r in rows):
            fail(f"the history panel does not name the author: {rows}")
        T.shot(d, "page-history.png")
    finally:
        d.quit()
        srv.stop()


def test_ctrl_digs_against_the_normal_and_the_sculpt_becomes_a_target():
    """Draw brush, a mouse dab on the cheek: the sculpted vertices move along their normals (the
    page's, from before the dab: offset · normal > 0 for most of them); undone, the same dab with
    Ctrl held moves them against (offset · normal < 0). Sculpt → target then makes a target of it
    that lists those vertices, and the sculpt layer is empty."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv, "session=demo&author=digger")
        d.execute_script("deformView.setMode('brush')")
        normals = d.execute_script("return Array.from(deformView.normals())")
        canvas = canvas_origin(d)
        nose = css_of_vertex(d, 20400)
        ox, oy = int(nose["x"] - canvas.size["width"] / 2) - 45, int(nose["y"] - canvas.size["height"] / 2) + 15
        signs = {}
        for ctrl in (False, True):
            v = srv.version()
            a = ActionChains(d)
            if ctrl:
                a.key_down(Keys.CONTROL)
            a.move_to_element_with_offset(canvas, ox, oy).click_and_hold().move_by_offset(4, 3).release()
            if ctrl:
                a.key_up(Keys.CONTROL)
            a.perform()
            wait_sculpted(srv, v)
            off = sculpt_offsets(srv)
            dots = [sum(o[k] * normals[3 * i + k] for k in range(3)) for i, o in off.items()]
            signs[ctrl] = (sum(x > 0 for x in dots), sum(x < 0 for x in dots), len(dots))
            last = d.execute_script("return deformView.lastStroke")
            print(f"ctrl {ctrl}: {signs[ctrl][0]} along the normal, {signs[ctrl][1]} against, of {signs[ctrl][2]}; "
                  f"strength sent {last['last']['strength']:.3f}")
            if not ctrl:
                d.execute_script("return deformView.undo()")
                wait_for("the undo", lambda: not sculpt_offsets(srv), 30)
        up, _, n = signs[False]
        _, down, m = signs[True]
        if n < 20 or up < 0.9 * n:
            fail(f"the plain dab raised {up} of {n} vertices")
        if m < 20 or down < 0.9 * m:
            fail(f"the Ctrl dab dug {down} of {m} vertices")
        sculpted = set(sculpt_offsets(srv))
        targets0 = len(srv.call("targets.list", {"session": "demo"}))
        d.find_element(By.ID, "target-name").send_keys("dimple")
        d.find_element(By.ID, "make-target").click()
        wait_for("the new target", lambda: len(srv.call("targets.list", {"session": "demo"})) == targets0 + 1, 20)
        t = srv.call("targets.list", {"session": "demo"})[-1]
        print(f"target {t['name']}: {t['vertices']} vertices (the sculpt had {len(sculpted)})")
        if t["name"] != "dimple" or t["vertices"] != len(sculpted) or sculpt_offsets(srv):
            fail(f"Sculpt → target made {t} and left {len(sculpt_offsets(srv))} sculpted vertices")
        T.shot(d, "page-dig.png")
    finally:
        d.quit()
        srv.stop()


OCTAHEDRON = "\n".join(["v 1 0 0", "v -1 0 0", "v 0 1 0", "v 0 -1 0", "v 0 0 1", "v 0 0 -1",
                        "f 1 3 5", "f 3 2 5", "f 2 4 5", "f 4 1 5", "f 3 1 6", "f 2 3 6", "f 4 2 6", "f 1 4 6"]) + "\n"


def drop_file(d, name, text):
    """A file dropped onto the page (a DataTransfer with one File in a drop event: what the
    browser makes of a file dragged in from the desktop)."""
    d.execute_script("""
      const dt = new DataTransfer();
      dt.items.add(new File([arguments[1]], arguments[0], {type: 'text/plain'}));
      window.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
      window.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));""", name, text)


def captured_download(d, button):
    """Clicks a download button with URL.createObjectURL watched: the Blob the page saves, as
    base64 (fetched in pieces), and the file name it saves it under."""
    d.execute_script("""
        window.__saved = null;
        if (!window.__wrapped) {
          const make = URL.createObjectURL;
          URL.createObjectURL = (b) => { window.__blob = b; return make(b); };
          const click = HTMLAnchorElement.prototype.click;
          HTMLAnchorElement.prototype.click = function () { if (this.download) window.__saved = this.download; return click.call(this); };
          window.__wrapped = true;
        }
        window.__blob = null;
        document.getElementById(arguments[0]).click();""", button)
    name = wait_for(f"the {button} file", lambda: d.execute_script("return window.__saved"), 60)
    d.execute_script("""window.__bytes = null;
        window.__blob.arrayBuffer().then((a) => { window.__bytes = new Uint8Array(a); });""")
    n = wait_for("the blob's bytes", lambda: d.execute_script("return window.__bytes && window.__bytes.length"), 30)
    parts = []
    for at in range(0, n, 1 << 20):
        parts.append(base64.b64decode(d.execute_script("""
            const b = window.__bytes.subarray(arguments[0], arguments[0] + (1 << 20));
            let s = ''; for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode(...b.subarray(i, i + 8192));
            return btoa(s);""", at)))
    return name, b"".join(parts)


def test_the_pages_obj_and_glb_downloads_hold_the_sculpt_and_history_revert_brings_a_step_back():
    """Two brush strokes (JSON-RPC), then the page's OBJ and GLB buttons: the files they save,
    parsed here, hold the base head plus the sculpt (sculpt.get's offsets; OBJ text to 1e-5,
    GLB POSITION float32 exactly enough: 1e-6), the GLB's 68 morph targets. Then the page's
    history panel's revert on the first stroke brings the session back to the offsets it had
    after it."""
    data = os.path.join(T.TMP, f"data-{time.time_ns()}")
    os.makedirs(data)
    srv = Server("--data", data, admin_token="admintoken-0123456789")
    d = browser()
    try:
        head = os.path.join(T.TMP, "export-base.obj")
        subprocess.run([os.path.join(T.BUILD, "bin", "deformd"), "--write-demo", head], check=True, capture_output=True)
        base, _ = T.read_obj(head)
        open_page(d, srv, "session=demo&token=admintoken-0123456789")
        for k, c in enumerate(([0.046, -0.016, 0.075], [-0.03, 0.02, 0.085])):
            srv.call("brush.stroke", {"session": "demo", "brush": "inflate", "radius": 0.02, "strength": 0.4, "samples": [{"center": c}]})
            wait_for(f"stroke {k + 1}", lambda: len(srv.call("history.list", {"session": "demo"})["steps"]) == k + 1, 30)
            if k == 0:
                first = srv.call("sculpt.get", {"session": "demo"})
        now = srv.call("sculpt.get", {"session": "demo"})
        if not len(now["offsets"]) > len(first["offsets"]):
            fail("the second stroke sculpted nothing new: the revert below would prove nothing")
        want = [list(p) for p in base]
        for i, o in now["offsets"].items():
            for c in range(3):
                want[int(i)][c] += o[c]
        name, obj = captured_download(d, "download-obj")
        verts = [tuple(float(x) for x in line.split()[1:4]) for line in obj.decode().splitlines() if line.startswith("v ")]
        err = max(abs(verts[i][c] - want[i][c]) for i in range(len(want)) for c in range(3)) if len(verts) == len(want) else None
        print(f"{name}: {len(obj)} bytes, {len(verts)} vertices, max |v - (base + sculpt)| {err}")
        if err is None or err > 1e-5:
            fail(f"the OBJ download is not the sculpted head ({len(verts)} vertices, error {err})")
        name, glb = captured_download(d, "download-glb")
        magic, version, length = struct.unpack_from("<4sII", glb, 0)
        jlen, jtype = struct.unpack_from("<II", glb, 12)
        if magic != b"glTF" or version != 2 or length != len(glb) or jtype != 0x4E4F534A:
            fail(f"the GLB download's header is {magic!r} {version} {length} (of {len(glb)} bytes)")
        gltf = json.loads(glb[20:20 + jlen])
        blen, btype = struct.unpack_from("<II", glb, 20 + jlen)
        binary = glb[28 + jlen:28 + jlen + blen]
        prim = gltf["meshes"][0]["primitives"][0]
        acc = gltf["accessors"][prim["attributes"]["POSITION"]]
        view = gltf["bufferViews"][acc["bufferView"]]
        at = view.get("byteOffset", 0) + acc.get("byteOffset", 0)
        pos = struct.unpack_from(f"<{3 * acc['count']}f", binary, at)
        err = max(abs(pos[3 * i + c] - want[i][c]) for i in range(len(want)) for c in range(3)) if acc["count"] == len(want) else None
        print(f"{name}: {len(glb)} bytes, {acc['count']} positions, {len(prim.get('targets', []))} morph targets, "
              f"max |POSITION - (base + sculpt)| {err}")
        if err is None or err > 1e-6 or len(prim.get("targets", [])) != 68:
            fail(f"the GLB download is not the sculpted head with its targets (error {err})")
        # The history panel: revert to the state after the first stroke.
        d.find_element(By.ID, "history-button").click()
        rows = wait_for("the history rows", lambda: d.execute_script(
            "return document.querySelectorAll('#history-list .step button').length") == 2 or None, 30)
        d.execute_script("document.querySelectorAll('#history-list .step button')[1].click()")  # newest first: [1] is stroke 1
        wait_for("the revert", lambda: srv.call("sculpt.get", {"session": "demo"})["version"] > now["version"], 30)
        back = srv.call("sculpt.get", {"session": "demo"})
        err = max((abs(back["offsets"].get(i, [0, 0, 0])[c] - first["offsets"].get(i, [0, 0, 0])[c])
                   for i in set(back["offsets"]) | set(first["offsets"]) for c in range(3)), default=0)
        print(f"revert: version {now['version']} -> {back['version']}, {len(back['offsets'])} sculpted vertices "
              f"(after stroke 1: {len(first['offsets'])}), max difference {err}")
        if err > 1e-7 or rows is None:
            fail(f"the page's revert did not bring back the state after stroke 1 (difference {err})")
        T.shot(d, "page-history-reverted.png")
    finally:
        d.quit()
        srv.stop()


def test_a_dropped_file_opens_a_session_and_the_page_says_why_not_without_a_data_directory():
    """On a server with a data directory and the administrator's token, an OBJ dropped onto the
    page is uploaded, opened as session "octa" and shown (6 vertices, no target panel); the session
    picker lists it. On the test server without a data directory the drop opens nothing and the
    page says the server has no data directory."""
    data = os.path.join(T.TMP, f"data-{time.time_ns()}")
    os.makedirs(data)
    srv = Server("--data", data, admin_token="admintoken-0123456789")
    d = browser()
    try:
        open_page(d, srv, "session=demo&token=admintoken-0123456789")
        drop_file(d, "octa.obj", OCTAHEDRON)
        wait_for("the new session", lambda: d.execute_script(
            "return !!(window.deformView && deformView.session === 'octa' && deformView.vertexCount === 6 && deformView.firstFrameMs)"), 60)
        if not d.execute_script("return document.getElementById('sliders').hidden"):
            fail("a session without targets still shows the target panel")
        names = wait_for("the session picker", lambda: d.execute_script(
            "return Array.from(document.querySelectorAll('#sessions option')).map((o) => o.value)") or None, 20)
        print(f"session picker: {names}")
        if "octa" not in names or "demo" not in names:
            fail(f"the picker lists {names}")
        T.shot(d, "page-dropped.png")
    finally:
        d.quit()
        srv.stop()
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        drop_file(d, "octa.obj", OCTAHEDRON)
        up = wait_for("the refusal", lambda: (lambda u: u if u and u["state"] == "refused" else None)(
            d.execute_script("return deformView.panels.lastUpload")), 30)
        status = d.execute_script("return document.getElementById('status').textContent")
        print(f"refused: {up['reason']}")
        if "no data directory" not in up["reason"] or "no data directory" not in status:
            fail(f"the page said {status!r}")
    finally:
        d.quit()
        srv.stop()


def test_the_page_shows_matcaps_the_brush_circles_and_the_key_sheet():
    """Each matcap colours the head as its colours say (the mean over the head's pixels: clay
    greyish, red wax red, skin warm: R > G > B), unlike the lit mode and each other; the brush circle is drawn on
    the overlay around the pointer (its radius and the dashed half-falloff circle), the gesture's
    handle and region in drag mode; H opens the key sheet with every binding and Esc closes it."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        colours = {}
        for shade in ("0", "1", "2", "3"):
            d.execute_script("const s = document.getElementById('shade'); s.value = arguments[0];"
                             "s.dispatchEvent(new Event('change'))", shade)
            time.sleep(0.5)
            w, h, bpp, px = T.canvas_pixels(d)
            bg = px[(h // 2 * w + 5) * bpp:(h // 2 * w + 5) * bpp + 3]  # the left edge: background
            head = [px[(y * w + x) * bpp:(y * w + x) * bpp + 3] for y in range(h // 4, 3 * h // 4, 5)
                    for x in range(w // 3, 2 * w // 3, 5)]
            head = [c for c in head if max(abs(c[k] - bg[k]) for k in range(3)) > 30]
            colours[shade] = tuple(round(sum(c[k] for c in head) / len(head)) for k in range(3))
            T.shot(d, f"page-shade-{shade}.png")
        print(f"mean colour of the head: lit {colours['0']}, clay {colours['1']}, red wax {colours['2']}, skin {colours['3']}")
        r, g, b = colours["2"]
        if not r > 2 * g:
            fail(f"red wax is not red: {colours['2']}")
        r, g, b = colours["3"]
        if not r > g > b:
            fail(f"skin is not warm: {colours['3']}")
        r, g, b = colours["1"]
        if not max(r, g, b) - min(r, g, b) < 60:
            fail(f"clay is not greyish: {colours['1']}")
        if len(set(colours.values())) < 4:
            fail("two shadings look the same")
        press(d, "c")  # C cycles, as deform-view's: after skin comes lit
        if d.execute_script("return document.getElementById('shade').value") != "0":
            fail("C did not cycle the shading from skin back to lit")
        d.execute_script("deformView.setMode('brush')")
        canvas = canvas_origin(d)
        nose = css_of_vertex(d, 20400)
        ox, oy = int(nose["x"] - canvas.size["width"] / 2) - 40, int(nose["y"] - canvas.size["height"] / 2)
        ActionChains(d).move_to_element_with_offset(canvas, ox, oy).perform()
        hit = wait_for("the brush circle", lambda: d.execute_script("return deformView.circleHit"), 10)
        radius = d.execute_script("return parseFloat(document.getElementById('radius').value)") * T.diagonal(T.dump(srv, "c.obj")[0])
        # A point on the circle: the hit point moved by the radius in the circle's plane.
        n = hit["normal"]
        a0 = [1, 0, 0] if abs(n[0]) < 0.9 else [0, 1, 0]
        t = [n[1] * a0[2] - n[2] * a0[1], n[2] * a0[0] - n[0] * a0[2], n[0] * a0[1] - n[1] * a0[0]]
        lt = math.sqrt(sum(x * x for x in t))
        on = [hit["point"][k] + radius * t[k] / lt for k in range(3)]
        cam = view_of(d)
        x, y, _ = project(cam, on)
        cx, cy = (x + 1) / 2 * cam["width"] / cam["ratio"], (1 - y) / 2 * cam["height"] / cam["ratio"]
        lit = 0
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                lit += d.execute_script("return deformView.overlayPixel(arguments[0], arguments[1])[3]", cx + dx, cy + dy) > 0
        print(f"brush circle: {lit} of 25 overlay pixels drawn around a point of the circle")
        if lit == 0:
            fail("no brush circle where its radius projects")
        T.shot(d, "page-brush-circle.png")
        d.execute_script("deformView.setMode('drag')")
        ActionChains(d).move_by_offset(2, 0).perform()
        time.sleep(0.5)
        T.shot(d, "page-gesture-circles.png")
        press(d, "h")
        sheet = wait_for("the key sheet", lambda: d.execute_script(
            "const k = document.getElementById('keys'); return k.hidden ? null : k.textContent"), 10)
        for key in ("middle drag", "Shift + middle drag", "wheel", "Home", "numpad .", "Ctrl", "Shift + F", "pen pressure", "X, Y, Z", "shading"):
            if key not in sheet:
                fail(f"the key sheet does not list {key}")
        T.shot(d, "page-keys.png")
        press(d, Keys.ESCAPE)
        wait_for("the sheet to close", lambda: d.execute_script("return document.getElementById('keys').hidden"), 10)
    finally:
        d.quit()
        srv.stop()


def test_f_then_move_sets_the_radius_and_escape_puts_it_back():
    """F over the head, then a move of the pointer: the radius slider follows the pointer's
    distance (a move away makes it larger); a click keeps it; F, a move and Esc put it back."""
    srv = Server()
    d = browser()
    try:
        open_page(d, srv)
        d.execute_script("deformView.setMode('brush')")
        canvas = canvas_origin(d)
        r0 = float(d.find_element(By.ID, "radius").get_attribute("value"))
        ActionChains(d).move_to_element_with_offset(canvas, -60, 0).perform()
        ActionChains(d).send_keys("f").move_by_offset(40, 0).click().perform()
        r1 = float(d.find_element(By.ID, "radius").get_attribute("value"))
        ActionChains(d).send_keys("f").move_by_offset(40, 0).send_keys(Keys.ESCAPE).perform()
        r2 = float(d.find_element(By.ID, "radius").get_attribute("value"))
        shown = d.find_element(By.ID, "radius-val").text
        print(f"radius {r0} -> {r1} (kept), then {r2} after Esc; shown {shown}")
        if not r1 > r0 * 1.2:
            fail(f"F and a move of 40 px away took the radius from {r0} to {r1}")
        if abs(r2 - r1) > 1e-9:
            fail("Esc did not put the radius back")
        if shown != f"{r1:.3f}":
            fail(f"the slider shows {shown} for {r1}")
    finally:
        d.quit()
        srv.stop()


TESTS = {name[5:]: fn for name, fn in globals().items() if name.startswith("test_")}

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(TESTS))
        sys.exit(0)
    T.BUILD = sys.argv[1]
    T.SHOTS = os.environ.get("WEB_SHOTS")
    if T.SHOTS:
        os.makedirs(T.SHOTS, exist_ok=True)
    t0 = time.time()
    TESTS[sys.argv[2]]()
    print(f"passed in {time.time() - t0:.1f} s")
