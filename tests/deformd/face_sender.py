#!/usr/bin/env python3
"""face_sender.py — a face tracker for the tests, standard library only: VMC (OSC 1.0 over UDP,
encoded here with struct from the OSC 1.0 specification and VMC's /VMC/Ext/Blend/Val and
/VMC/Ext/Blend/Apply) or Live Link Face frames (packet version 6, the layout PyLiveLinkFace's
decode reads: little-endian version, 37-byte id, big-endian name length and name, frame time,
a count byte of 61 and 61 big-endian floats), written from those published layouts and not
from deformd's decoders.

  face_sender.py vmc|livelink PORT --hz 60 --seconds 5 --names a,b,c --log FILE [--bundle]
      sends HZ frames a second for SECONDS; frame i gives name k the value value(i, k) below
      and FILE gets one JSON line per frame: {"i": i, "values": {name: value}}
  face_sender.py malformed vmc|livelink PORT
      sends the malformed datagrams the tests name, one of each, and prints how many of each kind
      it sent as JSON
"""
import json
import math
import socket
import struct
import sys
import time

# ARFaceAnchor's blendshapes in Live Link Face's order (Apple's ARKit documentation lists the
# same 52 names; PyLiveLinkFace's FaceBlendShape enum gives this order).
LIVELINK_NAMES = [
    "eyeBlinkLeft", "eyeLookDownLeft", "eyeLookInLeft", "eyeLookOutLeft", "eyeLookUpLeft", "eyeSquintLeft",
    "eyeWideLeft", "eyeBlinkRight", "eyeLookDownRight", "eyeLookInRight", "eyeLookOutRight", "eyeLookUpRight",
    "eyeSquintRight", "eyeWideRight", "jawForward", "jawLeft", "jawRight", "jawOpen", "mouthClose",
    "mouthFunnel", "mouthPucker", "mouthLeft", "mouthRight", "mouthSmileLeft", "mouthSmileRight",
    "mouthFrownLeft", "mouthFrownRight", "mouthDimpleLeft", "mouthDimpleRight", "mouthStretchLeft",
    "mouthStretchRight", "mouthRollLower", "mouthRollUpper", "mouthShrugLower", "mouthShrugUpper",
    "mouthPressLeft", "mouthPressRight", "mouthLowerDownLeft", "mouthLowerDownRight", "mouthUpperUpLeft",
    "mouthUpperUpRight", "browDownLeft", "browDownRight", "browInnerUp", "browOuterUpLeft", "browOuterUpRight",
    "cheekPuff", "cheekSquintLeft", "cheekSquintRight", "noseSneerLeft", "noseSneerRight", "tongueOut",
    "headYaw", "headPitch", "headRoll", "leftEyeYaw", "leftEyePitch", "leftEyeRoll", "rightEyeYaw",
    "rightEyePitch", "rightEyeRoll",
]


def value(i, k):
    """Frame i's value of name k: in [0, 1], different from frame i - 1's for every name, exact
    in float32 (a multiple of 1/1024)."""
    return ((i * 37 + k * 101) % 1000 + 1) / 1024.0


# ---- OSC 1.0 ---------------------------------------------------------------------------------

def osc_string(s):
    b = s.encode("utf-8") + b"\0"
    return b + b"\0" * (-len(b) % 4)


def osc_message(address, tags, *args):
    out = osc_string(address) + osc_string("," + tags)
    for t, a in zip(tags, args):
        if t == "s":
            out += osc_string(a)
        elif t == "f":
            out += struct.pack(">f", a)
        elif t == "i":
            out += struct.pack(">i", a)
    return out


def osc_bundle(elements):
    out = b"#bundle\0" + struct.pack(">Q", 1)  # time tag 1: immediately
    for e in elements:
        out += struct.pack(">i", len(e)) + e
    return out


def vmc_frame(values):
    """One VMC frame as one bundle: a Val per name, then Apply (VMC's preferred form)."""
    msgs = [osc_message("/VMC/Ext/Blend/Val", "sf", n, v) for n, v in values.items()]
    msgs.append(osc_message("/VMC/Ext/Blend/Apply", ""))
    return [osc_bundle(msgs)]


def vmc_frame_loose(values):
    """The same as one datagram per message (senders that send no bundles)."""
    msgs = [osc_message("/VMC/Ext/Blend/Val", "sf", n, v) for n, v in values.items()]
    return msgs + [osc_message("/VMC/Ext/Blend/Apply", "")]


# ---- Live Link Face ---------------------------------------------------------------------------

def livelink_frame(values, frame, subject="iPhone", fps=60):
    shapes = [values.get(n, 0.0) for n in LIVELINK_NAMES]
    name = subject.encode("utf-8")
    device = ("$" + "0" * 36).encode("ascii")  # 37 bytes, as the app's "$" + UUID
    return [struct.pack("<I", 6) + device + struct.pack(">i", len(name)) + name +
            struct.pack(">ifii", frame, 0.0, fps, 1) + struct.pack(">B", 61) + struct.pack(">61f", *shapes)]


def send_stream(kind, port, hz, seconds, names, log, loose):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    count = int(round(hz * seconds))
    start = time.monotonic()
    with open(log, "w") as f:
        for i in range(count):
            vals = {n: value(i, k) for k, n in enumerate(names)}
            if kind == "vmc":
                datagrams = vmc_frame_loose(vals) if loose else vmc_frame(vals)
            else:
                datagrams = livelink_frame(vals, i)
            for d in datagrams:
                sock.sendto(d, ("127.0.0.1", port))
            f.write(json.dumps({"i": i, "values": vals}) + "\n")
            f.flush()
            wait = start + (i + 1) / hz - time.monotonic()
            if wait > 0:
                time.sleep(wait)


def send_malformed(kind, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = {}

    def send(reason, d):
        sock.sendto(d, ("127.0.0.1", port))
        sent[reason] = sent.get(reason, 0) + 1
        time.sleep(0.005)  # a socket's receive buffer holds a few of the 40 KB ones: no burst

    if kind == "vmc":
        good = osc_message("/VMC/Ext/Blend/Val", "sf", "jawOpen", 0.5)
        send("malformed", good[:-2])                                             # truncated
        send("malformed", good[:len(good) - 4])                                  # an argument missing
        send("malformed", osc_message("/VMC/Ext/Blend/Val", "si", "jawOpen", 3))  # wrong type tags
        send("malformed", osc_message("/VMC/Ext/Blend/Val", "ss", "jawOpen", "x"))
        send("malformed", osc_string("/VMC/Ext/Blend/Val") + osc_string(",sQ") + osc_string("jawOpen"))
        send("malformed", osc_bundle([good])[:-4])                               # a bundle cut short
        send("nonfinite", osc_message("/VMC/Ext/Blend/Val", "sf", "jawOpen", math.nan))
        send("nonfinite", osc_message("/VMC/Ext/Blend/Val", "sf", "jawOpen", math.inf))
        # 10,000 names in one frame: a datagram holds at most 65,507 bytes (about 1,600 of these
        # messages), so the frame comes as ten bundles of 1,000 names, Apply in the last
        big = [osc_message("/VMC/Ext/Blend/Val", "sf", "n%d" % k, 0.25) for k in range(10000)]
        for part in range(10):
            tail = [osc_message("/VMC/Ext/Blend/Apply", "")] if part == 9 else []
            send("too_many_names", osc_bundle(big[part * 1000:(part + 1) * 1000] + tail))
        # unknown names are not malformed: the frame applies, the name is counted
        send("unknown", osc_bundle([osc_message("/VMC/Ext/Blend/Val", "sf", "noSuchShape", 0.5),
                                    osc_message("/VMC/Ext/Blend/Apply", "")]))
    else:
        good = livelink_frame({"jawOpen": 0.5}, 1)[0]
        send("malformed", good[:-1])                       # wrong size: one byte short
        send("malformed", good + b"\0")                    # one byte over
        send("malformed", good[:40])                       # truncated inside the id
        send("malformed", struct.pack("<I", 5) + good[4:])  # another packet version
        bad_count = bytearray(good)
        bad_count[45 + 6 + 16] = 60                        # a count other than 61
        send("malformed", bytes(bad_count))
        nan = bytearray(good)
        nan[45 + 6 + 17:45 + 6 + 21] = struct.pack(">f", math.nan)
        send("nonfinite", bytes(nan))
    print(json.dumps(sent))


def main(argv):
    if argv[1] == "malformed":
        send_malformed(argv[2], int(argv[3]))
        return 0
    kind, port = argv[1], int(argv[2])
    opts = {"--hz": "60", "--seconds": "5", "--names": ",".join(LIVELINK_NAMES[:52]), "--log": "/dev/null"}
    k = 3
    loose = False
    while k < len(argv):
        if argv[k] == "--loose":
            loose = True
            k += 1
            continue
        opts[argv[k]] = argv[k + 1]
        k += 2
    send_stream(kind, port, float(opts["--hz"]), float(opts["--seconds"]), opts["--names"].split(","),
                opts["--log"], loose)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
