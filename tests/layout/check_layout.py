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
  folders    server/deformd/'s folders include headers only from the folders DEFORMD_FOLDERS
             (below) allows them, a folder always its own and the top level (main.c,
             srv_server.c, deformd.h) anything; server/deformd/ holds only those folders and
             DEFORMD_TOP; and the wider tree keeps to TREE_FORBIDDEN (protocol/ includes nothing
             of server/ or viewer/, shared/ nothing of protocol/, server/ or viewer/, solve,
             client and tools nothing of server/deformd/). An include is resolved as the
             compiler would find it in the tree: beside the file, else the one project file with
             that path ending; headers outside the tree (system, generated) are not checked.
  headers    no .h in shared/ protocol/ server/ viewer/ has more than 400 lines.
  functions  no function in a .c file of shared/ protocol/ server/ viewer/ has more than 150
             lines, from the line of its name to its closing brace, found by a brace-matching
             scanner that skips comments, string and character literals and preprocessor
             lines.
  selftest   the folders, headers and functions rules fail on a small tree made to break each
             of them, saying what breaks, and pass on the same tree unbroken.

Prints what breaks the rule and exits 1; exits 0 when it holds.
"""
import bisect
import collections
import os
import re
import subprocess
import sys

SOURCE_DIRS = ["shared", "protocol", "server", "viewer"]

# Which folders of server/deformd/ each folder may include headers from, lowest layer first
# (docs/architecture.md). A folder may always include its own; the top level may include all.
DEFORMD_FOLDERS = {
    "base": [],
    "store": ["base"],
    "files": ["base"],
    "core": ["base", "store", "files"],
    "net": ["base", "core"],
    "access": ["base", "core", "net", "store"],
    "session": ["base", "core", "net", "store", "files"],
    "rpc": ["base", "core", "net", "access", "session", "store", "files"],
    "ports": ["base", "core", "net", "access", "session", "store", "files", "rpc"],
    "cluster": ["base", "core", "net", "access", "session", "store", "files", "rpc", "ports"],
}
# The files server/deformd/ holds beside those folders; the .c and .h among them are the top level.
DEFORMD_TOP = ["main.c", "srv_server.c", "deformd.h", "CMakeLists.txt", "web_assets.cmake"]
# The wider tree: what each part must not include from (path prefixes, relative to the source).
TREE_FORBIDDEN = {
    "protocol": ["server", "viewer"],
    "shared": ["protocol", "server", "viewer"],
    "server/solve": ["server/deformd"],
    "server/client": ["server/deformd"],  # tools link the client, never the service
    "server/tools": ["server/deformd"],
}

MAX_HEADER_LINES = 400
MAX_FUNCTION_LINES = 150


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


INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def resolve_includes(src):
    """{file: [(line, written name, target)]} for every #include "..." of the project's .c and
    .h files, paths relative to `src`. An include resolves beside the file, else to the one
    project file whose path ends with the written name; target is that file, None when there is
    none, or the list of candidates when several match (the check cannot tell which)."""
    files = [os.path.relpath(f, src) for f in project_files(src, (".c", ".h"))]
    by_name = collections.defaultdict(list)
    for f in files:
        by_name[os.path.basename(f)].append(f)
    out = {}
    for f in files:
        rows = []
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                local = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                if os.path.exists(os.path.join(src, local)):
                    rows.append((n, inc, local))
                    continue
                cands = [c for c in by_name[os.path.basename(inc)] if ("/" + c).endswith("/" + inc)]
                rows.append((n, inc, cands[0] if len(cands) == 1 else cands or None))
        out[f] = rows
    return out


def deformd_folder(rel):
    """The server/deformd/ folder `rel` lies in, "(top)" for the top level, None outside."""
    parts = rel.split("/")
    if parts[:2] != ["server", "deformd"]:
        return None
    return parts[2] if len(parts) > 3 else "(top)"


def rule_folders(build, src):
    bad = 0
    root = os.path.join(src, "server", "deformd")
    for e in sorted(os.listdir(root)):
        if e in DEFORMD_TOP or (e in DEFORMD_FOLDERS and os.path.isdir(os.path.join(root, e))):
            continue
        print(f"server/deformd/{e}: neither one of the folders {list(DEFORMD_FOLDERS)} "
              f"nor one of the files {DEFORMD_TOP}")
        bad = 1
    for f, rows in sorted(resolve_includes(src).items()):
        here = deformd_folder(f)
        for n, inc, target in rows:
            if target is None:
                continue  # not a project header (system, generated in the build)
            if isinstance(target, list):
                print(f"{f}:{n}: includes {inc}, which names several files ({', '.join(target)}): "
                      f"write the folder")
                bad = 1
                continue
            there = deformd_folder(target)
            if here not in (None, "(top)") and there is not None and there != here:
                allowed = DEFORMD_FOLDERS.get(here, [])
                if there not in allowed:
                    print(f"{f}:{n}: includes {inc} from folder {there}, allowed: "
                          f"{', '.join([here] + allowed)}")
                    bad = 1
            for part, forbidden in TREE_FORBIDDEN.items():
                if not f.startswith(part + "/"):
                    continue
                for x in forbidden:
                    if target.startswith(x + "/"):
                        print(f"{f}:{n}: includes {inc} ({target}): {part}/ includes nothing of {x}/")
                        bad = 1
    return bad


def rule_headers(build, src):
    bad = 0
    for f in project_files(src, (".h",)):
        with open(f, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_HEADER_LINES:
            print(f"{os.path.relpath(f, src)}: {n} lines (at most {MAX_HEADER_LINES})")
            bad = 1
    return bad


def blank_non_code(text):
    """`text` with comments, string and character literals and preprocessor lines (with their
    continuations) turned into spaces, newlines kept, so braces and line numbers can be read
    from what is left."""
    out, i, n, line_start = [], 0, len(text), True
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            i += 1
            line_start = True
            continue
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                else:
                    out.append(" ")
                    i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


NOT_A_FUNCTION = {"if", "while", "for", "switch", "sizeof", "return", "_Alignof", "__attribute__"}


def function_spans(text):
    """(name, first line, last line) of each function defined in C source `text`: a top-level
    brace block whose head ends in a parameter list after a name. Also returns whether the
    braces balance (False: the scanner was confused, and says so rather than guess)."""
    s = blank_non_code(text)
    newlines = [i for i, c in enumerate(s) if c == "\n"]

    def line_of(pos):
        return bisect.bisect_left(newlines, pos) + 1

    spans, depth, current, balanced = [], 0, None, True
    for i, c in enumerate(s):
        if c == "{":
            if depth == 0:
                current = None
                j = i - 1
                while j >= 0 and s[j].isspace():
                    j -= 1
                if j >= 0 and s[j] == ")":
                    d = 0
                    while j >= 0:
                        d += {")": 1, "(": -1}.get(s[j], 0)
                        if d == 0:
                            break
                        j -= 1
                    base = max(0, j - 256)  # the name just before the parameter list
                    m = re.search(r"([A-Za-z_]\w*)\s*$", s[base:j])
                    if m and m.group(1) not in NOT_A_FUNCTION:
                        current = (m.group(1), line_of(base + m.start(1)))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                balanced, depth = False, 0
            elif depth == 0 and current:
                spans.append((current[0], current[1], line_of(i)))
                current = None
    return spans, balanced and depth == 0


def rule_functions(build, src):
    bad = 0
    for f in project_files(src, (".c",)):
        rel = os.path.relpath(f, src)
        with open(f, encoding="utf-8", errors="replace") as fh:
            spans, balanced = function_spans(fh.read())
        if not balanced:
            print(f"{rel}: braces do not balance outside comments and literals; cannot measure")
            bad = 1
        for name, first, last in spans:
            length = last - first + 1
            if length > MAX_FUNCTION_LINES:
                print(f"{rel}:{first}: {name} {length} lines (at most {MAX_FUNCTION_LINES})")
                bad = 1
    return bad


def rule_selftest(build, src):
    """The folders, headers and functions rules fail on a small tree made to break each of them
    (naming what breaks) and pass on the same tree without the breaks."""
    import contextlib
    import io
    import tempfile

    def tree(root, broken):
        files = {
            "server/deformd/base/srv_a.h": '#include "srv_b.h"\n' if broken else "\n",
            "server/deformd/net/srv_b.h": '#include "srv_a.h"\n',
            "server/deformd/main.c": '#include "srv_b.h"\n',
            "server/tools/t.c": '#include "srv_a.h"\n' if broken else "\n",
            "shared/m.h": "\n" * (MAX_HEADER_LINES + (1 if broken else 0)),
            "protocol/p.h": '#include "m.h"\n',  # protocol/ may include shared/
            "shared/m.c": ('#include "p.h"\n' if broken else "") + "/* { */ static const char *s = \"{\";\n"
                          "static int f(int x)\n{\n" + "  if (x) { x = '}'; } // }\n" * (MAX_FUNCTION_LINES - 3) +
                          ("  x++;\n" if broken else "") + "}\n"
                          "#define BRACE {\nstruct q { int (*g)(void); };\nint v[] = {1, 2};\n",
        }
        if broken:
            os.makedirs(os.path.join(root, "server", "deformd", "extra"))
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as fh:
                fh.write(text)

    expect = {
        rule_folders: ["server/deformd/extra: neither", "server/deformd/base/srv_a.h:1: includes srv_b.h from "
                       "folder net, allowed: base", "server/tools/t.c:1: includes srv_a.h", "shared/m.c:1: includes p.h"],
        rule_headers: [f"shared/m.h: {MAX_HEADER_LINES + 1} lines"],
        rule_functions: [f"shared/m.c:3: f {MAX_FUNCTION_LINES + 1} lines"],
    }
    bad = 0
    for broken in (False, True):
        with tempfile.TemporaryDirectory() as root:
            tree(root, broken)
            for rule, lines in expect.items():
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    rc = rule(build, root)
                said = out.getvalue()
                missing = [l for l in lines if l not in said] if broken else []
                if rc != (1 if broken else 0) or missing or (not broken and said):
                    print(f"{rule.__name__} on the {'broken' if broken else 'clean'} tree: exit {rc}, said:\n"
                          f"{said}missing: {missing}")
                    bad = 1
    return bad


RULES = {"calls": rule_calls, "includes": rule_includes, "solve": rule_solve, "lines": rule_lines,
         "server": rule_server, "nogl": rule_nogl, "registry": rule_registry, "folders": rule_folders,
         "headers": rule_headers, "functions": rule_functions, "selftest": rule_selftest}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in RULES:
        print(__doc__)
        sys.exit(2)
    sys.exit(RULES[sys.argv[3]](os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
