#!/usr/bin/python3
"""bench_python.py BUILD_DIR [--runs N] — the Python package's figures for docs/performance.md,
against a deformd --demo of its own (the demo head: 41,077 vertices, 68 targets), with the venv
tests/python/run.sh makes (`bash tests/python/run.sh build install` first):

    bash tests/python/run.sh build bench_python.py --runs 20

  call          a state.get round trip, blocking client (median of N);
  positions     Client.positions("demo") over the bulk arrays (median of N, the connection open),
                and welded;
  slow way      the same with bulk=False: a lossless replica joined for the call (median of 3);
  watch         Client.watch("demo") until its SNAPSHOT is decoded, lossless and quantised
                (median of 3), and the replica's positions() (the §8.2 formula), with numpy and,
                in a second process, without;
  set           set_sculpt_offsets of every vertex (median of N);
  download      download("demo", "obj") through session.export chunks (median of 3).
Not a test: figures only."""
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from deformd import _arrays

sys.path.insert(0, os.path.dirname(__file__))
import test_live as T  # noqa: E402


def median_ms(f, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        out.append(1000 * (time.perf_counter() - t))
    return statistics.median(out)


def main():
    T.BUILD = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 20
    if "--no-numpy" in sys.argv:
        _arrays.numpy = None
    srv = T.Server()
    try:
        with srv.client() as c, srv.client(bulk=False) as slow:
            if "--no-numpy" not in sys.argv:
                print(f"call        state.get              {median_ms(lambda: c.state_get('demo'), runs):8.2f} ms")
                c.positions("demo")  # opens the stream connection
                print(f"positions   bulk, render           {median_ms(lambda: c.positions('demo'), runs):8.2f} ms")
                print(f"positions   bulk, welded           {median_ms(lambda: c.positions('demo', welded=True), runs):8.2f} ms")
                print(f"positions   bulk=False             {median_ms(lambda: slow.positions('demo'), 3):8.2f} ms")
                off = np.zeros((41077, 3), np.float32)
                off[:, 1] = 0.0001
                print(f"set         41,077 offsets         {median_ms(lambda: c.set_sculpt_offsets('demo', off), runs):8.2f} ms")
                print(f"download    OBJ                    {median_ms(lambda: c.download('demo', 'obj'), 3):8.2f} ms")
            tag = "without numpy" if "--no-numpy" in sys.argv else "with numpy"
            for codec in ("lossless", "quantised"):
                print(f"watch       {codec:9s} {tag:13s}{median_ms(lambda: c.watch('demo', codec=codec).close(), 3):8.2f} ms")
            with c.watch("demo") as r:
                print(f"replica     positions() {tag:13s}{median_ms(r.positions, 3):8.2f} ms")
    finally:
        srv.stop()
    if "--no-numpy" not in sys.argv:
        subprocess.run([sys.executable, __file__, sys.argv[1], "--runs", "3", "--no-numpy"], check=True)


if __name__ == "__main__":
    main()
