"""test_codec.py BUILD_DIR — the Python decoder (python/deformd/protocol.py, meshopt.py,
replica.py) against the C codec, on the byte fixtures tests/web/write_fixtures.c writes for the
JavaScript one: the C decoders' verdicts (0 or the PROTO_E* code) on valid and malformed payloads,
the C replica's positions after each frame of each stream (float32 bits), and the C encoders' bytes
for the messages this package sends (HELLO, PING, BYE). Oracle: the C codec (protocol/), which
tests/protocol checks against the documented layouts."""
import json
import sys
from array import array

from deformd import _arrays
from deformd import protocol as P
from deformd.errors import ProtocolError
from deformd.replica import ReplicaState

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def main(path):
    items = [json.loads(line) for line in open(path) if line.strip()]
    # The package asks for no capability "entropy" (docs/protocol.md §12.11), so it is never sent
    # those joins: their streams and SNAPSHOT cases (head flag bit 2) are the page's and C's only.
    def entropy_case(i):
        return i["kind"] == "case" and i["decoder"] == "snapshot2" and len(i["hex"]) > 33 and int(i["hex"][32:34], 16) & 4
    items = [i for i in items if not i.get("name", "").endswith("-entropy") and not entropy_case(i)]
    streams = {i["name"]: i for i in items if i["kind"] == "stream"}
    snap = bytes.fromhex(streams["small-v2-shift5"]["frames"][0]["frame"])
    trav = P.decode_snapshot2(P.split_frame(snap)[1]).trav
    decoders = {
        "header": P.decode_header, "welcome": P.decode_welcome, "caps": P.decode_caps, "error": P.decode_error,
        "ping": P.decode_ping, "weights": P.decode_weights, "delta": P.decode_delta,
        "target_meta": P.decode_target_meta, "target_add": P.decode_target_add, "snapshot": P.decode_snapshot,
        "snapshot2": P.decode_snapshot2, "delta2": lambda p: P.decode_delta2(p, trav),
        "target_add2": lambda p: P.decode_target_add2(p, trav), "bulk": P.decode_bulk,
    }
    cases = [i for i in items if i["kind"] == "case"]
    # The payloads of capabilities the package never asks for (so never receives) have no Python
    # decoder; their headers are checked above like every other. Any other decoder must be here.
    not_ported = {"mask", "presence", "texture", "texclip", "texweights"}
    check({c["decoder"] for c in cases} - set(decoders) == not_ported,
          f"the fixtures' decoders Python lacks are exactly {sorted(not_ported)}")
    for d in sorted({c["decoder"] for c in cases} - not_ported):
        mine = [c for c in cases if c["decoder"] == d]
        wrong = 0
        for c in mine:
            try:
                decoders[d](bytes.fromhex(c["hex"]))
                got = 0
            except ProtocolError as e:
                got = e.code
            if got != c["expect"]:
                wrong += 1
                if wrong <= 5:
                    print(f"  {d} {c['hex'][:80]}…: C says {c['expect']}, Python {got}")
        refused = sum(1 for c in mine if c["expect"])
        check(wrong == 0, f"{d}: {len(mine)} payloads ({refused} refused by C): {wrong} verdicts differ")
        check(refused > 0 and refused < len(mine), f"{d}: has both accepted and refused cases")
    check(set(decoders) <= {c["decoder"] for c in cases}, "every decoder has cases")

    for use_numpy in ([False, True] if _arrays.numpy is not None else [False]):
        saved = _arrays.numpy
        if not use_numpy:
            _arrays.numpy = None
        try:
            for s in streams.values():
                r = ReplicaState()
                for i, f in enumerate(s["frames"]):
                    h, p = P.split_frame(bytes.fromhex(f["frame"]))
                    r.apply(h, p)
                    check(r.version == f["version"], f"{s['name']} frame {i}: version {r.version} != {f['version']}")
                    want = bytes.fromhex(f["positions"])
                    got = r.evaluate().tobytes()
                    diff = sum(1 for k in range(0, len(want), 4) if want[k:k + 4] != got[k:k + 4])
                    check(len(got) == len(want) and diff == 0,
                          f"{s['name']} frame {i} (numpy {use_numpy}): {diff} of {len(want) // 4} components differ")
                print(f"{s['name']}: {len(s['frames'])} frames, positions bit for bit (numpy {use_numpy})")
        finally:
            _arrays.numpy = saved

    encoders = [i for i in items if i["kind"] == "encoder"]
    done = 0
    for e in encoders:
        a = e["args"]
        if e["fn"] == "hello":
            b = P.encode_hello(a["session"], role=a["role"], token=a["token"], protocol=a["protocol"],
                               codec=a.get("codec", 0), max_rate=a.get("maxRate", 0), tolerance=a.get("tolerance", 0),
                               author=a.get("author", ""), caps=a.get("caps"))
        elif e["fn"] == "ping":
            b = P.encode_ping(a[0], a[1]["seq"], a[1].get("t0", 0), a[1].get("t1", 0))
        elif e["fn"] == "bye":
            b = P.encode_bye(a[0], a[1])
        elif e["fn"] == "bulkGet":
            b = P.encode_bulk_get(a[0], a[1], a[3], bool(a[2] & P.BULK_WELDED), a[4], a[5])
        elif e["fn"] == "bulkSet":
            b = P.encode_bulk_set(a[0], array("f", a[4]), bool(a[1] & P.BULK_WELDED), a[2])
        else:
            continue
        done += 1
        check(b.hex() == e["hex"], f"{e['fn']}({json.dumps(a)[:60]}): Python wrote {b.hex()[:60]}…, C {e['hex'][:60]}…")
    check(done >= 10, f"encoder cases checked: {done}")
    print(f"{len(cases)} decoder cases, {len(streams)} streams, {done} encoder cases")
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)


if __name__ == "__main__":
    import os
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:  # the C codec writes the fixtures (tests/web/write_fixtures.c)
        subprocess.run([os.path.join(sys.argv[1], "tests", "web-fixtures"), d], check=True)
        main(os.path.join(d, "fixtures.jsonl"))
