#!/usr/bin/env python3
"""Finds import circles between the files of a crate's src/.

A file imports another when one of its `use` declarations, or a path in
its code, starting with `crate::`, `super::`, `self::` or a child module's
name, names an item of the other file. Re-exports are followed to the file
that defines the item, so `use super::Request` in http/echo.rs leads to
http/request.rs, not to the http/mod.rs that re-exports it; declaring a
module (`mod x;`) is not an import. Comments and string literals are left
out. Two or more files that import each other in a circle fail the check,
which prints the circle with the imports that close it.

Usage: cycles.py CRATE_DIR... (each holding a src/ with lib.rs)
"""

import os
import re
import sys
from collections import defaultdict

# Known circles, each as (crate dir, its files, why it is left): a circle
# whose files are all in one of these passes, with a note; any other, or
# one that grows to take in another file, fails. Remove an entry once its
# circle is broken (the check says when it no longer finds it).
ALLOWED = [
    # The HTTP/1 grammar: the server's (http/proto/) and the client's.
    ("handlers", {"client/mod.rs", "client/request.rs"},
     "Client and the RequestBuilder it hands out"),
    # The rest of the handlers, and the framework.
    ("handlers", {"metrics/admin.rs", "metrics/mod.rs"},
     "Metrics (mod.rs) and the admin service that serves it"),
    ("handlers", {"proxy/branch.rs", "proxy/drain.rs", "proxy/service.rs"},
     "FanOut and its branches and drains, which take it back"),
    ("handlers", {"ws/deflate.rs", "ws/frame.rs"},
     "the frame codec and permessage-deflate, which writes its frames' heads"),
    ("framework", {"sys/mod.rs", "sys/unix.rs"},
     "the Unix-socket syscalls and the shared helpers of sys/mod.rs"),
    ("framework", {"driver/uring/cqe_queue.rs", "driver/uring/fixed.rs",
                   "driver/uring/mod.rs", "driver/uring/ops.rs",
                   "driver/uring/setup.rs", "stats.rs"},
     "the io_uring Driver (mod.rs) and the parts that take it back; "
     "stats.rs names the ring's flags"),
    ("framework", {"sync/countdown.rs", "sync/mod.rs", "sync/parker.rs",
                   "sync/remote.rs", "sync/wake.rs"},
     "sync/mod.rs defines Notify and lock() beside the re-exports"),
    ("framework", {"executor/current.rs", "executor/join.rs",
                   "executor/mod.rs", "executor/owner.rs", "executor/task.rs"},
     "tasks, their join handles and the current executor"),
    ("framework", {"fs/file.rs", "fs/mod.rs"},
     "File and the helpers in fs/mod.rs"),
    ("framework", {"net/secure.rs", "net/socket.rs", "net/stream.rs", "net/unix.rs"},
     "Stream, its raw Socket and the Secure layer's traits, PeerCred in net/unix.rs"),
    ("framework", {"server/datagram.rs", "server/handle.rs", "server/listen.rs",
                   "server/mod.rs", "server/moving/mod.rs", "server/serve.rs",
                   "server/signal.rs"},
     "the server's parts, and the moves of connections between its cores"),
    ("framework", {"op/msg_space.rs", "op/send_msg.rs"},
     "a message space and the send cursor it keeps"),
    ("framework", {"tls/mod.rs", "tls/server.rs"},
     "ServerTls and the certificate helpers in tls/mod.rs"),
]

IDENT = re.compile(r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*")
DEFINES = r"\b(?:fn|struct|enum|trait|type|const|static|union|mod)\s+{}\b"


def strip(text):
    """The text with comments and string and char literals blanked out,
    newlines kept so that offsets still give line numbers."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif m := re.match(r'b?r(#*)"', text[i:i + 260]) if c in "br" and (
                i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None:
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (
                i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if text.startswith("\\", i + 1):
                j = text.find("'", i + 2)
                j = n if j < 0 else j + 1
            elif i + 2 < n and text[i + 2] == "'":
                j = i + 3
            else:
                j = i + 1
                out.append(" ")
                i = j
                continue
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokens(text):
    """(token, offset) pairs: identifiers, `::` and single punctuation."""
    for m in re.finditer(r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*|::|[0-9][A-Za-z0-9_.]*|\S", text):
        yield m.group(0), m.start()


def parse_use_tree(toks, i, prefix, out):
    """Parses a use tree at toks[i]; appends (path, binding) to out, where
    binding is the name it brings into scope, '*' for a glob. Returns the
    index after the tree."""
    path = list(prefix)
    while i < len(toks):
        t = toks[i][0]
        if t == "{":
            i += 1
            while i < len(toks) and toks[i][0] != "}":
                i = parse_use_tree(toks, i, path, out)
                if i < len(toks) and toks[i][0] == ",":
                    i += 1
            return i + 1
        if t == "*":
            out.append((path, "*"))
            return i + 1
        if t == "::":
            i += 1
            continue
        if IDENT.fullmatch(t):
            path = path + [t]
            i += 1
            if i < len(toks) and toks[i][0] == "::":
                continue
            binding = t
            if i + 1 < len(toks) and toks[i][0] == "as":
                binding = toks[i + 1][0]
                i += 2
            if binding == "self":
                binding = path[-2] if len(path) > 1 else "self"
            out.append((path, binding))
            return i
        return i + 1
    return i


class File:
    def __init__(self, path, module):
        self.path = path
        self.module = module  # tuple, ('crate', ...)
        with open(path, encoding="utf-8") as f:
            self.raw = f.read()
        self.text = strip(self.raw)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        # (module, path, binding, offset) for each use; (module, path, offset)
        # for each path in code; child modules declared `mod x;` per module.
        self.uses, self.paths = [], []
        self.children = defaultdict(set)
        self.inline = set()
        self._scan()

    def line(self, offset):
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def _scan(self):
        toks = list(tokens(self.text))
        stack = []  # per open brace: the inline module it opens, or None
        module = self.module
        i = 0
        while i < len(toks):
            t, off = toks[i]
            prev = toks[i - 1][0] if i else ""
            if t == "{":
                name = None
                if i >= 2 and toks[i - 2][0] == "mod" and IDENT.fullmatch(prev):
                    name = prev
                    module = module + (name,)
                    self.inline.add(module)
                stack.append(name)
            elif t == "}":
                if stack and stack.pop() is not None:
                    module = module[:-1]
            elif t == "mod" and i + 2 < len(toks) and toks[i + 2][0] == ";":
                self.children[module].add(toks[i + 1][0])
            elif t == "use" and prev != "$":
                j = i + 1
                while j < len(toks) and toks[j][0] != ";":
                    j += 1
                found = []
                k = i + 1
                if k < len(toks) and toks[k][0] == "::":
                    k += 1  # `use ::extern_crate`
                    i = j
                    continue
                parse_use_tree(toks[k:j], 0, [], found)
                for path, binding in found:
                    self.uses.append((module, path, binding, off))
                i = j
            elif t in ("crate", "super", "self") and prev not in ("$", "in", "::") \
                    and i + 1 < len(toks) and toks[i + 1][0] == "::":
                path = [t]
                j = i + 1
                while j + 1 < len(toks) and toks[j][0] == "::" and IDENT.fullmatch(toks[j + 1][0]):
                    path.append(toks[j + 1][0])
                    j += 2
                self.paths.append((module, path, off))
                i = j
                continue
            i += 1

    def defines(self, name):
        return re.search(DEFINES.format(re.escape(name)), self.text) is not None \
            or re.search(r"macro_rules!\s*{}\b".format(re.escape(name)), self.text) is not None


class Crate:
    def __init__(self, root):
        self.root = root
        self.src = os.path.join(root, "src")
        self.files = {}  # module tuple -> File
        self.module_file = {}  # module tuple (inline ones too) -> File
        self._load(("crate",), os.path.join(self.src, "lib.rs"), self.src)
        self.macros = {}
        for f in self.files.values():
            for m in re.finditer(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)", f.text):
                self.macros.setdefault(m.group(1), f)

    def _load(self, module, path, dir_):
        f = File(path, module)
        self.files[module] = f
        self.module_file[module] = f
        for m in f.inline:
            self.module_file[m] = f
        for parent, names in f.children.items():
            # A `mod x;` inside an inline `mod a { }` lives in dir_/a/x.rs.
            sub = os.path.join(dir_, *parent[len(module):])
            for name in names:
                for cand, cdir in ((os.path.join(sub, name + ".rs"), os.path.join(sub, name)),
                                   (os.path.join(sub, name, "mod.rs"), os.path.join(sub, name))):
                    if os.path.exists(cand):
                        self._load(parent + (name,), cand, cdir)
                        break

    def children(self, module):
        f = self.module_file.get(module)
        if f is None:
            return set()
        kids = set(f.children.get(module, ()))
        kids |= {m[-1] for m in f.inline if m[:-1] == module}
        return kids

    def resolve(self, module, path, seen=None):
        """The file that defines what `path`, written in `module`, names,
        or None for another crate's."""
        seen = seen or set()
        key = (module, tuple(path))
        if key in seen:
            return None
        seen.add(key)
        cur = module
        segs = list(path)
        if not segs:
            return None
        if segs[0] == "crate":
            cur, segs = ("crate",), segs[1:]
        elif segs[0] in ("super", "self"):
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    cur = cur[:-1]
                segs = segs[1:]
        elif segs[0] in self.children(cur):
            pass
        else:
            # A name the module brought in with `use` (`use x::y; y::z()`).
            f = self.module_file.get(cur)
            for m, upath, binding, _ in (f.uses if f else ()):
                if m == cur and binding == segs[0] and upath[0] != segs[0]:
                    return self.resolve(cur, upath + segs[1:], seen)
            return None
        while segs:
            name = segs[0]
            if name in self.children(cur):
                cur, segs = cur + (name,), segs[1:]
                continue
            return self.item(cur, name, seen)
        return self.module_file.get(cur)

    def item(self, module, name, seen):
        """The file that defines `name`, an item of `module`, following
        the module's `use`s of it."""
        f = self.module_file.get(module)
        if f is None:
            return None
        if f.defines(name):
            return f
        external = False
        for m, upath, binding, _ in f.uses:
            if m == module and binding == name:
                target = self.resolve(module, upath, seen)
                if target is not None:
                    return target
                external = True
        if external:
            # Another crate's (a facade such as `use std::sync::Mutex`).
            return None
        for m, upath, binding, _ in f.uses:
            if m == module and binding == "*":
                target = self.resolve(module, upath + [name], seen)
                if target is not None and target.defines(name):
                    return target
        if name in self.macros:
            return self.macros[name]
        return f

    def edges(self):
        """{importing file path: {imported file path: [(line, path text)]}}"""
        out = defaultdict(lambda: defaultdict(list))
        for f in self.files.values():
            refs = [(m, p, off) for m, p, b, off in f.uses if p != ["self"]]
            refs += f.paths
            for module, path, off in refs:
                target = self.resolve(module, path)
                if target is None or target is f:
                    continue
                out[f.path][target.path].append((f.line(off), "::".join(path)))
        return out


def circles(graph):
    """The strongly connected components of more than one file."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def shortest_circle(graph, comp):
    """One shortest circle through the component's first file."""
    start = comp[0]
    members = set(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        nxt = []
        for v in queue:
            for w in sorted(graph.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        queue = nxt
    return [start]


def main(roots):
    status = 0
    for root in roots:
        crate = Crate(root)
        edges = crate.edges()
        rel = lambda p: os.path.relpath(p, crate.src)
        graph = defaultdict(set)
        for a, targets in edges.items():
            for b in targets:
                graph[a].add(b)
        name = os.path.basename(os.path.normpath(root))
        allowed = [(files, why) for crate_, files, why in ALLOWED if crate_ == name]
        seen = set()
        failed = 0
        for comp in circles(graph):
            files = {rel(f) for f in comp}
            known = next((i for i, (a, _) in enumerate(allowed) if files <= a), None)
            if known is not None:
                seen.add(known)
                print(f"cycles: {root}/src: known circle ({allowed[known][1]}): "
                      + ", ".join(sorted(files)))
                continue
            failed += 1
            print(f"cycles: {root}/src: {len(comp)} files import each other in a circle:",
                  file=sys.stderr)
            for f in comp:
                print(f"    {rel(f)}", file=sys.stderr)
            print("  for one:", file=sys.stderr)
            circle = shortest_circle(graph, comp)
            for a, b in zip(circle, circle[1:]):
                line, path = edges[a][b][0]
                more = len(edges[a][b]) - 1
                extra = f" (and {more} more)" if more else ""
                print(f"    {rel(a)}:{line}: {path} -> {rel(b)}{extra}", file=sys.stderr)
        for i, (files, why) in enumerate(allowed):
            if i not in seen:
                print(f"cycles: {root}/src: the known circle of {', '.join(sorted(files))} "
                      "is gone: remove it from ALLOWED in .ci/cycles.py")
        if failed:
            status = 1
        else:
            print(f"cycles: {root}/src: no new import circle among its {len(crate.files)} files")
    return status


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
