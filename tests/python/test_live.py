#!/usr/bin/python3
"""test_live.py BUILD_DIR TEST — the deformd package (python/) against a live deformd on the demo
head. Each TEST is one ctest test (tests/CMakeLists.txt); `test_live.py BUILD_DIR --list` names
them. Run with the venv python tests/python/run.sh made, so what is tested is what pip installed.

Oracles: `deformctl watch --dump` (the C replica, the reference of docs/protocol.md §8.2) for the
Python replica and the bulk positions; the server's JSON answers (sculpt.get, state.get,
targets.list, weights.get) for the bulk arrays; a scripted fake server that answers in reverse
order for pipelining. Every wait is on a condition bounded by a timeout that only fails the test."""
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from array import array

import deformd
import deformd.aio
from deformd import protocol as P

BUILD = None
TMP = tempfile.mkdtemp(prefix="deformd-python-")


def fail(msg):
    raise AssertionError(msg)


class Server:
    """deformd --demo on free ports, with a data directory (uploads need one)."""

    def __init__(self, *args, admin_token=None, ports=(0, 0), data=None):
        self.dir = tempfile.mkdtemp(dir=TMP)
        self.log = open(os.path.join(self.dir, "deformd.log"), "w")
        env = dict(os.environ)
        env.pop("DEFORMD_ADMIN_TOKEN", None)
        if admin_token:
            env["DEFORMD_ADMIN_TOKEN"] = admin_token
        self.p = subprocess.Popen([os.path.join(BUILD, "bin", "deformd"), "--demo", "--data",
                                   data or os.path.join(self.dir, "data"), "--stream-port", str(ports[0]),
                                   "--rpc-port", str(ports[1]), "--http-port", "off", "--log-level", "warn",
                                   *args], stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        line = self.p.stdout.readline()
        m = re.match(r"stream_port=(\d+) rpc_port=(\d+)", line)
        if not m:
            fail(f"deformd printed {line!r}; log {self.log.name}")
        self.stream, self.rpc = map(int, m.groups())
        self.env = {"DEFORMD_RPC": f"127.0.0.1:{self.rpc}", "DEFORMD_STREAM": f"127.0.0.1:{self.stream}"}

    def client(self, **kw):
        kw.setdefault("host", "127.0.0.1")
        kw.setdefault("port", self.rpc)
        kw.setdefault("stream_port", self.stream)
        kw.setdefault("author", "tester")
        return deformd.Client(**kw)

    def ctl(self, *args, timeout=120):
        cmd = [os.path.join(BUILD, "bin", "deformctl"), "--rpc", f"127.0.0.1:{self.rpc}", "--stream",
               f"127.0.0.1:{self.stream}", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            fail(f"{' '.join(cmd)}: {r.stdout} {r.stderr}")
        return r.stdout

    def dump(self, *watch_args):
        """The C replica's positions: `deformctl watch demo --count 0 --dump F.obj`, as float32 bits."""
        path = os.path.join(self.dir, f"dump-{time.time_ns()}.obj")
        self.ctl("watch", "demo", "--count", "0", "--dump", path, *watch_args)
        vals = array("f")
        with open(path) as fh:
            for line in fh:
                if line.startswith("v "):
                    vals.extend(float(x) for x in line.split()[1:4])
        return vals

    def stop(self):
        self.p.terminate()
        try:
            status = self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail("deformd did not stop within 30 s of SIGTERM")
        if status != 0:
            fail(f"deformd exited with status {status}; log {self.log.name}")


def bits(a):
    return array("f", a).tobytes() if not isinstance(a, (bytes, bytearray)) else a


def flat(x):
    """numpy (n, 3) or array('f') as array('f')."""
    if isinstance(x, array):
        return x
    return array("f", x.astype("<f4").reshape(-1).tobytes())


def same_bits(what, got, want):
    g, w = flat(got).tobytes(), flat(want).tobytes()
    if len(g) != len(w):
        fail(f"{what}: {len(g) // 4} components, want {len(w) // 4}")
    diff = sum(1 for k in range(0, len(w), 4) if g[k:k + 4] != w[k:k + 4])
    if diff:
        fail(f"{what}: {diff} of {len(w) // 4} components differ")


def scripted_session(c):
    """Weights, strokes, a gesture, a new target, a configure: every kind of frame a viewer gets."""
    c.weights_set("demo", weights={"smile_L": 0.8, "jaw_open": 0.3, "blink_R": 1})
    c.brush_stroke("demo", "draw", radius=0.02, samples=[{"center": [0.046, -0.016, 0.075]},
                                                         {"center": [0.05, -0.01, 0.074]}])
    g = c.deform_begin("demo", pick=20400, handle_radius=0.005, roi_radius=0.03, mode="laplacian")["gesture"]
    c.deform_drag("demo", g, translate=[0, 0.003, 0.006])
    c.deform_end("demo", g)
    c.targets_create_from_sculpt("demo", "bump")
    c.weights_set("demo", weights={"bump": 0.5})
    c.brush_stroke("demo", "inflate", radius=0.015, samples=[{"center": [-0.04, -0.02, 0.07]}])
    c.targets_configure("demo", "cheek_puff", drivers=["smile_L", "jaw_open"])
    return c.state_get("demo")["version"]


# ---- the tests ----------------------------------------------------------------------------------

def test_pipelined_calls_answered_out_of_order_reach_their_callers():
    """A fake server reads 20 requests, then answers them in reverse order, each with its own id
    and method: every future, and every thread's call, gets its own answer; errors too. Then the
    same against deformd: a slow blend.fit beside fast calls from four threads."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    port = lsock.getsockname()[1]
    order = []

    def fake():
        s, _ = lsock.accept()
        f = s.makefile("rb")
        hello = json.loads(f.readline())  # the client's hello comes first, and is waited for
        assert hello["method"] == "hello", hello
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": hello["id"], "result": {"author": "x", "connection": 1}}).encode() + b"\n")
        reqs = [json.loads(f.readline()) for _ in range(20)]
        for r in reversed(reqs):
            order.append(r["id"])
            if r["params"]["n"] % 5 == 0:
                msg = {"jsonrpc": "2.0", "id": r["id"], "error": {"code": -32006, "message": f"no {r['params']['n']}"}}
            else:
                msg = {"jsonrpc": "2.0", "id": r["id"], "result": {"n": r["params"]["n"], "method": r["method"]}}
            s.sendall(json.dumps(msg).encode() + b"\n")
        f.readline()  # until the client closes
        s.close()

    t = threading.Thread(target=fake, daemon=True)
    t.start()
    with deformd.Client(host="127.0.0.1", port=port, author="x", timeout=30) as c:
        futs = [c.submit(f"m.{n}", n=n) for n in range(10)]
        results = [None] * 10
        threads = []
        for n in range(10, 20):
            def one(n=n):
                try:
                    results[n - 10] = c.call(f"m.{n}", n=n)
                except deformd.RpcError as e:
                    results[n - 10] = e
            threads.append(threading.Thread(target=one))
            threads[-1].start()
        for n, f in enumerate(futs):
            if n % 5 == 0:
                e = f.exception(30)
                if not isinstance(e, deformd.RpcError) or e.code != -32006 or e.message != f"no {n}":
                    fail(f"call {n}: {e!r}")
            elif f.result(30) != {"n": n, "method": f"m.{n}"}:
                fail(f"call {n} got {f.result()}")
        for th in threads:
            th.join(30)
        for n in range(10, 20):
            r = results[n - 10]
            if n % 5 == 0:
                if not isinstance(r, deformd.RpcError) or r.message != f"no {n}":
                    fail(f"threaded call {n}: {r!r}")
            elif r != {"n": n, "method": f"m.{n}"}:
                fail(f"threaded call {n} got {r}")
    t.join(30)
    if len(order) != 20 or order != sorted(order, reverse=True):
        fail(f"the fake server did not answer in reverse: {order}")

    srv = Server()
    try:
        with srv.client() as c:
            c.sculpt_set("demo", {100: [0.001, 0, 0]})
            n_targets = len(c.mesh_info("demo")["targets"])
            done = []
            slow = c.submit("blend.fit", session="demo", shape="sculpt")
            slow.add_done_callback(lambda f: done.append("fit"))
            fast = []
            for k in range(4):
                fast.append(c.submit("state.get", session="demo"))
                fast.append(c.submit("targets.list", session="demo"))
                fast.append(c.submit("weights.set", session="demo", weights={"smile_L": 0.1 * k}))
            fit = slow.result(60)
            if set(fit) != {"weights", "rms", "max_error", "max_vertex", "iterations", "active"}:
                fail(f"blend.fit got {fit}")
            for k in range(4):
                if fast[3 * k].result(60)["session"] != "demo" or len(fast[3 * k + 1].result(60)) != n_targets or \
                        set(fast[3 * k + 2].result(60)) != {"version"}:
                    fail("a fast call got another's answer")
            print("blend.fit finished after", done, "fast answers; all matched")
    finally:
        srv.stop()


def test_a_gesture_measured_against_the_exact_solve_from_python_answers_its_distance():
    """deform_begin's multires, proxy_vertices and measure_exact reach deformd: the gesture is on
    a proxy of about the size asked, and deform_end answers the replay's distance."""
    srv = Server()
    with srv.client() as c:
        b = c.deform_begin("demo", pick=2000, handle_radius=0.01, border="sharp", multires=True,
                           proxy_vertices=3000, measure_exact=True)
        assert b["multires"] and b["measure_exact"] and 2500 <= b["proxy_vertices"] <= 3500, b
        for y in (0.01, 0.02):
            c.deform_drag("demo", b["gesture"], translate=[0, y, 0])
        d = c.deform_end("demo", b["gesture"])["exact_distance"]
        assert d["measured"] and d["drags"] == 2 and 0 < d["max_over_diag"] < 0.5, d
        assert 0 < d["rms_over_diag"] <= d["max_over_diag"], d
    srv.stop()


def test_asyncio_client_has_the_same_methods_and_pipelines():
    """deformd.aio.Client: gather() of a slow and fast calls, a refused call as RpcError, watch;
    replicas left open close with their client."""
    srv = Server()

    async def main():
        async with deformd.aio.Client(host="127.0.0.1", port=srv.rpc, stream_port=srv.stream, author="ana") as c:
            fit, state, w = await asyncio.gather(c.blend_fit("demo", shape="sculpt"), c.state_get("demo"),
                                                 c.weights_set("demo", weights={"smile_L": 0.5}))
            assert "rms" in fit and state["session"] == "demo" and "version" in w, (fit, state, w)
            try:
                await c.weights_set("demo", weights={"smile_L": 2})
                fail("weight 2 accepted")
            except deformd.RpcError as e:
                assert e.code == -32006, e
            r = await c.watch("demo")
            v = (await c.weights_set("demo", weights={"jaw_open": 0.25}))["version"]
            await r.wait_version(v)
            assert r.weights()["jaw_open"] == 0.25
            await r.close()
            left = [await c.watch("demo"), await c.watch("demo", codec="quantised")]
        # The client closed with two replicas open: they closed with it, and keep what they had.
        assert all(x.closed for x in left), [x.closed for x in left]
        assert left[1].weights()["jaw_open"] == 0.25
    try:
        def methods(cls):
            return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}
        sync_names, aio_names = methods(deformd.Client), methods(deformd.aio.Client)
        missing = {n for n in sync_names - aio_names if n not in ("submit",)}
        if missing:
            fail(f"deformd.aio.Client lacks {sorted(missing)}")
        asyncio.run(main())
    finally:
        srv.stop()


def test_every_documented_method_has_a_typed_method():
    """Each method of docs/json-api.md §4's table is a method of the clients (dots as underscores)."""
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "json-api.md")).read()
    table = doc[doc.index("## 4. Methods"):doc.index("Every method that takes `session`")]
    names = set(re.findall(r"\| \[`([a-z_]+\.[a-z_]+|auth|hello)`", table))
    names |= set(re.findall(r"`([a-z]+\.[a-z_]+)`\]\(#", table))
    names |= {"token.create", "token.list", "token.revoke"}
    if len(names) < 40:
        fail(f"read only {len(names)} method names from docs/json-api.md: {sorted(names)}")
    for n in sorted(names):
        attr = n.replace(".", "_")
        for cls in (deformd.Client, deformd.aio.Client):
            f = getattr(cls, attr, None)
            if f is None or not f.__doc__:
                fail(f"{cls.__module__}.{cls.__name__} has no documented method {attr} for {n}")


def test_replica_equals_deformctl_watch_dump_after_a_scripted_session():
    """Python replicas (lossless, quantised, protocol 1) joined before a session of weights,
    strokes, a gesture, a new target and a configure hold, at the end, the positions
    `deformctl watch --dump` writes (lossless, --quantised, --protocol 1) bit for bit; a replica
    joined at the end agrees too, and its weights are weights.get's."""
    srv = Server()
    try:
        with srv.client() as c:
            reps = {"lossless": c.watch("demo"), "quantised": c.watch("demo", codec="quantised"),
                    "v1": c.watch("demo", protocol=1)}
            v = scripted_session(c)
            for r in reps.values():
                r.wait_version(v, 60)
            late = c.watch("demo")
            same_bits("lossless replica vs deformctl watch --dump", reps["lossless"].positions(), srv.dump())
            same_bits("late lossless replica vs deformctl watch --dump", late.positions(), srv.dump())
            same_bits("quantised replica vs deformctl watch --quantised --dump", reps["quantised"].positions(),
                      srv.dump("--quantised"))
            same_bits("protocol 1 replica vs deformctl watch --protocol 1 --dump", reps["v1"].positions(),
                      srv.dump("--protocol", "1"))
            want = {k: P.f32(v) for k, v in c.weights_get("demo")["weights"].items()}  # float32, printed shortest
            for name, r in reps.items():
                if r.weights() != want:
                    fail(f"{name} replica weights {r.weights()} != weights.get {want}")
                if r.version != v:
                    fail(f"{name} replica at version {r.version}, the session at {v}")
            tl = c.targets_list("demo")
            got = reps["lossless"].targets()
            for a, b in zip(tl, got):
                if (a["name"], P.f32(a["weight"]), a["min"], a["max"], a["muted"], a["drivers"], a["vertices"]) != \
                        (b["name"], b["weight"], b["min"], b["max"], b["muted"], b["drivers"], b["vertices"]):
                    fail(f"target {a} != replica {b}")
            for r in [*reps.values(), late]:
                r.close()
    finally:
        srv.stop()


def readme_blocks():
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "python", "README.md")).read()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_every_python_readme_example_runs_verbatim():
    """Every ```python block of python/README.md, in order, each in its own interpreter against
    one deformd (named by $DEFORMD_RPC / $DEFORMD_STREAM, as deformctl's), exits 0."""
    blocks = readme_blocks()
    if len(blocks) < 6:
        fail(f"python/README.md has {len(blocks)} python examples")
    srv = Server()
    try:
        env = dict(os.environ, **srv.env)
        env.pop("DEFORMD_TOKEN", None)
        cwd = tempfile.mkdtemp(dir=TMP)
        for i, code in enumerate(blocks):
            r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=300)
            print(f"--- example {i + 1} ---\n{r.stdout}{r.stderr}")
            if r.returncode != 0:
                fail(f"example {i + 1} of python/README.md exited {r.returncode}:\n{code}\n{r.stderr}")
    finally:
        srv.stop()


def test_tokens_are_sent_with_auth_and_in_hello():
    """On a server with tokens: no token is refused with -32009; the admin token passes auth; an
    editor token made with token.create is that user's author and joins the stream port."""
    admin = "dfm_" + "A" * 43
    srv = Server(admin_token=admin)
    try:
        with srv.client(token="") as c:
            pass
    except deformd.RpcError as e:
        if e.code != -32009:
            fail(f"without a token: {e}")
    else:
        fail("a client without a token was let in")
    try:
        with srv.client(token=admin, author="") as a:
            if a.role != "admin":
                fail(f"admin token: role {a.role}")
            tok = a.token_create("editor", "carol", session="demo")["token"]
        with srv.client(token=tok) as c:
            if c.role != "editor" or c.author != "carol":
                fail(f"editor token: role {c.role}, author {c.author}")
            c.weights_set("demo", weights={"smile_L": 0.5})
            r = c.watch("demo")
            if r.weights()["smile_L"] != 0.5:
                fail("the replica did not join with the token")
            r.close()
            try:
                c.session_create("x", "demo")
                fail("an editor created a session")
            except deformd.RpcError as e:
                if e.code != -32009:
                    fail(f"session.create as editor: {e}")
    finally:
        srv.stop()


def test_bulk_arrays_agree_with_sculpt_get_state_get_the_replica_and_the_slow_way():
    """After a scripted session: positions() over the bulk arrays equals the lossless replica and
    `deformctl watch --dump` bit for bit; the sculpt offsets equal sculpt.get's; a target's deltas
    the replica's; welded positions number mesh.info's topology_vertices and are render positions;
    the same calls with bulk=False (a replica joined per call) give the same bits; and
    set_sculpt_offsets is one step, stored as sculpt.set stores, that history_undo takes back."""
    srv = Server()
    try:
        with srv.client() as c, srv.client(bulk=False) as slow:
            scripted_session(c)
            c.sculpt_set("demo", {5: [0.001, -0.002, 0.0005], 41076: [0.25, 0, -0.125]})
            st = c.state_get("demo")
            r = c.watch("demo")
            cur = c.positions("demo")
            same_bits("bulk positions vs the replica", cur, r.positions())
            same_bits("bulk positions vs deformctl watch --dump", cur, srv.dump())
            same_bits("bulk=False positions vs bulk", slow.positions("demo"), cur)
            if cur.shape != (st["vertices"], 3):
                fail(f"positions shape {cur.shape}, state.get says {st['vertices']} vertices")
            dense = array("f", bytes(12 * st["vertices"]))
            for k, v in c.sculpt_get("demo")["offsets"].items():
                dense[3 * int(k):3 * int(k) + 3] = array("f", v)
            same_bits("bulk sculpt vs sculpt.get", c.positions("demo", what="sculpt"), dense)
            same_bits("bulk sculpt range", c.positions("demo", what="sculpt", first=41070, count=7), dense[3 * 41070:])
            same_bits("bulk=False sculpt", slow.positions("demo", what="sculpt"), dense)
            for t in ("bump", 3):
                same_bits(f"bulk deltas of {t}", c.positions("demo", what="target", target=t), r.target_deltas(t))
                same_bits(f"bulk=False deltas of {t}", slow.positions("demo", what="target", target=t),
                          r.target_deltas(t))
            welded = c.positions("demo", welded=True)
            if len(welded) != c.mesh_info("demo")["topology_vertices"]:
                fail(f"{len(welded)} welded positions, mesh.info says {c.mesh_info('demo')['topology_vertices']}")
            rows = {tuple(x) for x in cur.tolist()}
            if not all(tuple(x) in rows for x in welded.tolist()):
                fail("a welded position is no render vertex's position")
            if c._aio.bulk_fallbacks != 0 or slow._aio.bulk_fallbacks != 4:
                fail(f"fallbacks: bulk {c._aio.bulk_fallbacks}, bulk=False {slow._aio.bulk_fallbacks}")
            q = st["offset_quantum"]
            vals = [[0.003, -0.001, 0.0], [0.0, 0.0, 0.0], [-0.0007, 0.0002, 0.004]]
            v = c.set_sculpt_offsets("demo", vals, first=1000)
            if v != c.state_get("demo")["version"]:
                fail(f"set_sculpt_offsets answered version {v}, state.get says {c.state_get('demo')['version']}")
            got = c.sculpt_get("demo")["offsets"]
            for i, xyz in enumerate(vals):
                want = [P.f32(P.f32(round(P.f32(x) / q)) * q) for x in xyz]
                have = [P.f32(x) for x in got.get(str(1000 + i), [0, 0, 0])]
                if have != want:
                    fail(f"vertex {1000 + i}: sculpt.get {have}, want {want}")
            step = c.history_list("demo", limit=1)["steps"][0]
            if step["author"] != "tester" or step["version"] != v:
                fail(f"the step: {step}")
            c.history_undo("demo")
            if "1000" in c.sculpt_get("demo")["offsets"]:
                fail("history_undo did not take the bulk set back")
            try:
                c.set_sculpt_offsets("demo", [[1e30, 0, 0]], first=3)
                fail("an offset of 1e30 was accepted")
            except deformd.StreamError as e:
                if "beyond the largest allowed" not in e.message:
                    fail(f"1e30: {e}")
            r.close()
    finally:
        srv.stop()


def test_tls_on_both_ports_is_verified_against_the_ca_given():
    """deformd with --tls-cert/--tls-key (a certificate made here with openssl, for 127.0.0.1):
    a client with tls=CA_FILE calls, watches and reads bulk arrays over TLS; one that verifies
    against the system's CAs is refused by the handshake, not answered."""
    import ssl
    d = tempfile.mkdtemp(dir=TMP)
    script = ("set -e; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=test-ca "
              "-keyout ca.key -out ca.pem; openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
              "-subj /CN=deformd -keyout key.pem -out req.pem; printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext; "
              "openssl x509 -req -in req.pem -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext "
              "-out cert.pem")
    r = subprocess.run(["bash", "-c", script], cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"openssl could not make the test certificate (deploy/deps.sh installs openssl): {r.stderr}")
    srv = Server("--tls-cert", os.path.join(d, "cert.pem"), "--tls-key", os.path.join(d, "key.pem"))
    try:
        with srv.client(tls=os.path.join(d, "ca.pem")) as c:
            v = c.weights_set("demo", weights={"smile_L": 0.25})["version"]
            rep = c.watch("demo")
            if rep.version != v or rep.weights()["smile_L"] != 0.25:
                fail(f"the replica over TLS: version {rep.version}, weights {rep.weights()['smile_L']}")
            same_bits("bulk positions over TLS vs the replica", c.positions("demo"), rep.positions())
            rep.close()
        try:
            srv.client(tls=True).close()
            fail("a client that trusts only the system's CAs was let in")
        except ssl.SSLError:
            pass
    finally:
        srv.stop()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_client_connects_again_after_the_server_restarts():
    """A call while the server is down raises ConnectionClosed; once it is back (same ports, same
    data directory) the next call connects again, says hello again (the same author: its undo
    works across the restart) and the bulk arrays reopen their stream connection."""
    ports = (free_port(), free_port())
    data = tempfile.mkdtemp(dir=TMP)
    srv = Server(ports=ports, data=data)
    c = srv.client(timeout=30)
    try:
        c.weights_set("demo", weights={"smile_L": 0.5})
        before = c.positions("demo")
        srv.stop()
        try:
            c.state_get("demo")
            fail("a call to a stopped server was answered")
        except deformd.ConnectionClosed:
            pass
        srv = Server(ports=ports, data=data)
        if c.weights_get("demo")["weights"]["smile_L"] != 0.5:
            fail("the restarted server lost the weight")
        same_bits("positions after the restart", c.positions("demo"), before)
        c.history_undo("demo")  # the step of the first connection's author
        if c.weights_get("demo")["weights"]["smile_L"] != 0:
            fail("undo after the restart did not take back the author's step")
    finally:
        c.close()
        srv.stop()


def test_the_readme_and_json_api_point_to_the_python_package():
    """The README and docs/json-api.md §7 name python/README.md."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    readme = open(os.path.join(root, "README.md")).read()
    api = open(os.path.join(root, "docs", "json-api.md")).read()
    sec7 = api[api.index("## 7. From Python"):]
    if "python/README.md" not in readme or "../python/README.md" not in sec7:
        fail("README.md or docs/json-api.md §7 does not point to python/README.md")


TESTS = {name[5:]: f for name, f in sorted(globals().items()) if name.startswith("test_") and callable(f)}


def main():
    global BUILD
    BUILD = os.path.abspath(sys.argv[1])
    if sys.argv[2] == "--list":
        print("\n".join(TESTS))
        return
    TESTS[sys.argv[2]]()
    print("ok")


if __name__ == "__main__":
    main()
