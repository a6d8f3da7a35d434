#!/usr/bin/env python3
"""check_layout.py BUILD_DIR SOURCE_DIR RULE — checks that the tree keeps the shape
docs/architecture.md describes. Each RULE is one ctest test (tests/CMakeLists.txt):

  calls      no two source files call each other in a circle: the file-level graph of who calls
             whom, read from the built objects' symbols (nm: a file that uses a symbol another
             file defines depends on it), has no strongly connected component of two or more
             files. Callbacks (a function pointer set by a higher layer) are how a lower layer
             hands work back up, and do not count.
  includes   no header includes itself through others (the #include "..." graph is acyclic).
  solve      nothing under server/solve includes uv.h, cJSON.h or a srv_ header.
  lines      no .c file outside tests/ has more than 1,000 lines.
  server     server/ holds only CMakeLists.txt and the folders solve/ deformd/ client/ tools/.
  nogl       deform-bench links neither libGL nor libglfw (ldd).
  registry   no package registry's address appears in the repository (deploy/ fetches through
             the package clients and their own configuration).

Prints what breaks the rule and exits 1; exits 0 when it holds.
"""
import collections
import os
import re
import subprocess
import sys

SOURCE_DIRS = ["shared", "protocol", "server", "viewer"]


def project_files(src, exts):
    out = []
    for top in SOURCE_DIRS:
        for root, _, files in os.walk(os.path.join(src, top)):
            out += [os.path.join(root, f) for f in files if f.endswith(exts)]
    return sorted(out)


def cycles(graph):
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def report_cycles(graph, what):
    bad = cycles(graph)
    for comp in bad:
        print(f"{what} cycle among {len(comp)} files:")
        for f in comp:
            print(f"  {f} -> {', '.join(sorted(x for x in graph[f] if x in comp))}")
    return 1 if bad else 0


def rule_calls(build, src):
    defs, uses = {}, {}
    for root, _, files in os.walk(build):
        if "CMakeFiles" not in root:
            continue
        for f in files:
            if not f.endswith(".c.o"):
                continue
            obj = os.path.join(root, f)
            rel_dir = os.path.relpath(root, build).split(os.sep + "CMakeFiles")[0]
            if rel_dir.split(os.sep)[0] not in SOURCE_DIRS:
                continue  # tests and anything else built
            name = os.path.join(rel_dir, f[: -len(".o")])
            out = subprocess.run(["nm", "-g", obj], capture_output=True, text=True, check=True).stdout
            d, u = set(), set()
            for line in out.splitlines():
                p = line.split()
                if len(p) == 2 and p[0] == "U":
                    u.add(p[1])
                elif len(p) == 3 and p[1] in "TDBRCVW":
                    d.add(p[2])
            defs[name], uses[name] = d, u
    if not defs:
        print(f"no objects of {SOURCE_DIRS} under {build}: build first")
        return 1
    owner = {}
    for name, d in defs.items():
        for sym in d:
            owner.setdefault(sym, name)
    graph = collections.defaultdict(set)
    for name, u in uses.items():
        graph[name]
        for sym in u:
            if sym in owner and owner[sym] != name:
                graph[name].add(owner[sym])
    return report_cycles(graph, "call")


def rule_includes(build, src):
    files = project_files(src, (".c", ".h"))
    by_name = collections.defaultdict(list)
    for f in files:
        by_name[os.path.basename(f)].append(f)
    graph = collections.defaultdict(set)
    for f in files:
        graph[f]
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                local = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                target = local if os.path.exists(local) else None
                if target is None and len(by_name[os.path.basename(inc)]) == 1:
                    target = by_name[os.path.basename(inc)][0]
                if target:
                    graph[f].add(target)
    graph = {os.path.relpath(k, src): {os.path.relpath(x, src) for x in v} for k, v in graph.items()}
    return report_cycles(collections.defaultdict(set, graph), "include")


def rule_solve(build, src):
    bad = 0
    for f in project_files(src, (".c", ".h")):
        if not f.startswith(os.path.join(src, "server", "solve") + os.sep):
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+[<"]([^>"]+)[>"]', line)
                if m and (m.group(1) in ("uv.h", "cjson/cJSON.h", "cJSON.h") or
                          os.path.basename(m.group(1)).startswith("srv")):
                    print(f"{os.path.relpath(f, src)}:{n}: includes {m.group(1)}")
                    bad = 1
    return bad


def rule_lines(build, src):
    bad = 0
    for f in project_files(src, (".c",)):
        with open(f, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > 1000:
            print(f"{os.path.relpath(f, src)}: {n} lines (at most 1000)")
            bad = 1
    return bad


def rule_server(build, src):
    allowed = {"CMakeLists.txt", "solve", "deformd", "client", "tools"}
    extra = sorted(set(os.listdir(os.path.join(src, "server"))) - allowed)
    for e in extra:
        print(f"server/{e}: not one of {sorted(allowed)}")
    return 1 if extra else 0


def rule_nogl(build, src):
    exe = os.path.join(build, "bin", "deform-bench")
    out = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    if not out:
        print(f"ldd {exe} printed nothing: build it first")
        return 1
    bad = [l.strip() for l in out.splitlines() if re.search(r"lib(GL|GLX|EGL|OpenGL|glfw|epoxy)\b", l)]
    for l in bad:
        print(f"deform-bench links {l}")
    return 1 if bad else 0


REGISTRIES = re.compile(r"https?://(registry\.npmjs\.org|registry\.yarnpkg\.com|deb\.debian\.org|"
                        r"security\.debian\.org|pypi\.org|files\.pythonhosted\.org|crates\.io)")


def rule_registry(build, src):
    out = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True)
    files = out.stdout.split() if out.returncode == 0 else project_files(src, (".c", ".h", ".sh", ".md"))
    bad = 0
    for rel in files:
        path = os.path.join(src, rel)
        if not os.path.isfile(path) or rel.endswith((".png", ".glb", ".jpg")):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if REGISTRIES.search(line) and "check_layout.py" not in rel:
                    print(f"{rel}:{n}: {line.strip()[:120]}")
                    bad = 1
    return bad


RULES = {"calls": rule_calls, "includes": rule_includes, "solve": rule_solve, "lines": rule_lines,
         "server": rule_server, "nogl": rule_nogl, "registry": rule_registry}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in RULES:
        print(__doc__)
        sys.exit(2)
    sys.exit(RULES[sys.argv[3]](os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
