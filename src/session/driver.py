# The session driver: runs inside the sandbox as its program and keeps one interpreter for the
# whole session. The host sends cells on stdin and reads one reply per cell from the stdout it
# was started with; while a cell runs, fds 1 and 2 are files of the cell's own, so that what
# C code and child processes write is the cell's output too.
#
# Frames both ways: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.
#   request: {"op": "run", "id": N, "code": TEXT, "stdin": BASE64}   (stdin: what the cell reads)
#   reply:   {"id": N, "status": "ok" | "error", "stdout": TEXT, "stderr": TEXT,
#             "stdout_truncated": BOOL, "stderr_truncated": BOOL,
#             "result": BUNDLE | null, "display": [BUNDLE...],
#             "error": {"ename": TEXT, "evalue": TEXT, "traceback": [TEXT...]} | null}
#   BUNDLE: {MIME: TEXT}, binary types (image/png, image/jpeg) base64-encoded, as Jupyter does.
# Files under /work (paths relative to it, checked by the host), between cells:
#   {"op": "put", "id": N, "path": P, "data": BASE64} -> {"id": N, "status": "ok"}
#   {"op": "get", "id": N, "path": P, "limit": BYTES} -> {"id": N, "status": "ok", "data": BASE64}
#   {"op": "ls", "id": N, "path": P, "limit": COUNT}  -> {"id": N, "status": "ok",
#                                    "files": [{"path": P, "size": BYTES, "type": "file"|"dir"|"link"|"other"}]}
#   a failure:                                          {"id": N, "status": "error", "message": TEXT}
# Once it is ready, the driver sends an empty reply to cell 0.
#
# This file is product code, but nothing it sends is trusted: a cell can rewrite it, replace
# these functions or write to the reply fd. The host parses every reply strictly and bounds it
# (src/session/protocol.cpp); nothing here decides anything about security.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import stat
import struct
import sys
import traceback

OUTPUT_LIMIT = int(os.environ.pop("SANDBOXRUN_SESSION_OUTPUT_LIMIT", "1048576"))
DISPLAY_LIMIT = int(os.environ.pop("SANDBOXRUN_SESSION_DISPLAY_LIMIT", "8388608"))
DISPLAY_ITEMS = int(os.environ.pop("SANDBOXRUN_SESSION_DISPLAY_ITEMS", "100"))
SVG_FIGURES = os.environ.pop("SANDBOXRUN_SESSION_SVG_FIGURES", "") == "1"
BINARY_TYPES = ("image/png", "image/jpeg")
REPR_METHODS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
                ("text/latex", "_repr_latex_"), ("image/svg+xml", "_repr_svg_"),
                ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
                ("application/json", "_repr_json_"))
DRIVER = os.path.abspath(__file__)
WORK = os.getcwd()


def read_exact(f, n):
    data = bytearray()
    while len(data) < n:
        chunk = f.read(min(n - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def text_of(value, limit):
    text = value if isinstance(value, str) else repr(value)
    return text[:limit]


def bundle_of(obj, budget):
    """The object's MIME bundle: text/plain always, the _repr_*_ it has and that work."""
    try:
        plain = repr(obj)
    except Exception as e:  # a broken __repr__ is the cell's problem, not the session's
        plain = f"<{type(obj).__name__} object (repr failed: {type(e).__name__})>"
    bundle = {"text/plain": plain[:budget]}
    for mime, method in REPR_METHODS:
        fn = getattr(type(obj), method, None)
        if fn is None:
            continue
        try:
            data = fn(obj)
        except Exception:
            continue
        if data is None:
            continue
        if mime in BINARY_TYPES:
            if not isinstance(data, (bytes, bytearray)):
                continue
            data = base64.b64encode(bytes(data)).decode("ascii")
        elif mime == "application/json":
            try:
                data = json.dumps(data)
            except (TypeError, ValueError):
                continue
        elif not isinstance(data, str):
            continue
        if len(data) <= budget:
            bundle[mime] = data
    return bundle


class Cell:
    """One cell's outputs: its display items, in the order they were shown."""

    def __init__(self):
        self.display = []
        self.display_bytes = 0
        self.dropped = 0

    def show(self, obj):
        if len(self.display) >= DISPLAY_ITEMS:
            self.dropped += 1
            return
        bundle = bundle_of(obj, DISPLAY_LIMIT - self.display_bytes)
        size = sum(len(v) for v in bundle.values())
        if self.display_bytes + size > DISPLAY_LIMIT:
            self.dropped += 1
            return
        self.display_bytes += size
        self.display.append(bundle)


current = Cell()


def display(*objs):
    """Jupyter's display(): each object's MIME bundle, shown in order."""
    for obj in objs:
        current.show(obj)


class Figure:
    """A matplotlib figure as its PNG, its SVG when the session asked for it, and its text."""

    def __init__(self, fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        self.png = buf.getvalue()
        self.svg = None
        if SVG_FIGURES:
            buf = io.StringIO()
            fig.savefig(buf, format="svg", bbox_inches="tight")
            self.svg = buf.getvalue()
        self.text = repr(fig)

    def __repr__(self):
        return self.text

    def _repr_png_(self):
        return self.png

    def _repr_svg_(self):
        return self.svg


def show_figures(*_args, **_kwargs):
    """Every open figure as a display item, then closed (plt.show() in a session)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        try:
            current.show(Figure(plt.figure(num)))
        except Exception as e:
            print(f"sandboxrun: a figure could not be rendered: {type(e).__name__}: {e}", file=sys.stderr)
    plt.close("all")


def hook_pyplot():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and getattr(plt.show, "__name__", "") != "show_figures":
        plt.show = show_figures


def cell_traceback(exc):
    """The traceback without the driver's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == DRIVER:
        tb = tb.tb_next
    return traceback.format_exception(type(exc), exc, tb)


def run_code(code, filename, ns):
    """Runs the cell; returns the value of a trailing expression (or None)."""
    tree = ast.parse(code, filename=filename, mode="exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), ns)
    if last is not None:
        return eval(compile(last, filename, "eval"), ns)
    return None


class Capture:
    """fds 1 and 2 as files of the cell's own (sys.stdout/stderr over them, unbuffered), and
    fd 0 the cell's stdin (EOF after it)."""

    def __init__(self, stdin):
        self.stdin = stdin

    def __enter__(self):
        self.saved = (os.dup(0), os.dup(1), os.dup(2))
        self.files = (os.memfd_create("stdout"), os.memfd_create("stderr"))
        if self.stdin:  # else fd 0 stays /dev/null
            stdin = os.memfd_create("stdin")
            os.write(stdin, self.stdin)
            os.lseek(stdin, 0, os.SEEK_SET)
            os.dup2(stdin, 0)
            os.close(stdin)
        os.dup2(self.files[0], 1)
        os.dup2(self.files[1], 2)
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), errors="replace")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, errors="replace")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, errors="replace")
        return self

    def __exit__(self, *exc):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        sys.stdin, sys.stdout, sys.stderr = self.streams
        for fd, saved in enumerate(self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        return False

    def take(self, which):
        fd = self.files[which]
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, OUTPUT_LIMIT + 1)
        os.close(fd)
        return data[:OUTPUT_LIMIT].decode("utf-8", "replace"), len(data) > OUTPUT_LIMIT


def run_cell(req, ns):
    global current
    current = Cell()
    cell_id = int(req["id"])
    code = req["code"]
    filename = f"<cell {cell_id}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    reply = {"id": cell_id, "status": "ok", "result": None, "error": None}
    with Capture(base64.b64decode(req.get("stdin", ""))) as cap:
        hook_pyplot()
        try:
            value = run_code(code, filename, ns)
            if value is not None:
                ns["_"] = value
                reply["result"] = bundle_of(value, DISPLAY_LIMIT)
        except BaseException as e:  # SystemExit and KeyboardInterrupt end the cell, not the session
            reply["status"] = "error"
            reply["error"] = {"ename": type(e).__name__, "evalue": text_of(str(e), 65536),
                              "traceback": [line[:65536] for line in cell_traceback(e)[-200:]]}
        hook_pyplot()
        show_figures()
    reply["stdout"], reply["stdout_truncated"] = cap.take(0)
    reply["stderr"], reply["stderr_truncated"] = cap.take(1)
    reply["display"] = current.display
    if current.dropped:
        reply["stderr"] += f"\n[sandboxrun: {current.dropped} display items over the cell's limit were dropped]\n"
    return reply


def work_path(rel):
    return os.path.join(WORK, rel) if rel else WORK


def file_op(req):
    """put, get or ls under /work; what the host asked for, done with the sandbox's own rights."""
    reply = {"id": int(req["id"]), "status": "ok"}
    path = work_path(req["path"])
    try:
        if req["op"] == "put":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(req["data"]))
        elif req["op"] == "get":
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                if not os.path.isfile(path):
                    raise IsADirectoryError(f"{req['path']} is not a regular file")
                data = f.read(int(req["limit"]) + 1)
            if len(data) > int(req["limit"]):
                raise OSError(f"{req['path']} is larger than {req['limit']} bytes")
            reply["data"] = base64.b64encode(data).decode("ascii")
        else:
            reply["files"] = list_work(path, int(req["limit"]))
    except Exception as e:
        return {"id": reply["id"], "status": "error", "message": f"{type(e).__name__}: {e}"[:4096]}
    return reply


def list_work(top, limit):
    files = []
    for root, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(dirs + names):
            full = os.path.join(root, name)
            st = os.lstat(full)
            kind = ("dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode)
                    else "link" if stat.S_ISLNK(st.st_mode) else "other")
            files.append({"path": os.path.relpath(full, WORK), "size": st.st_size if kind == "file" else 0,
                          "type": kind})
            if len(files) > limit:
                raise OSError(f"more than {limit} files under /work")
    return files


def main():
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a cell reading stdin gets EOF, not the protocol
    os.close(null)
    builtins.display = display
    ns = {"__name__": "__main__", "__builtins__": builtins}
    # Ready: an empty reply to cell 0, so that the host sends cells to a running interpreter.
    hello = {"id": 0, "status": "ok", "stdout": "", "stderr": "", "stdout_truncated": False,
             "stderr_truncated": False, "result": None, "display": [], "error": None}
    data = json.dumps(hello).encode()
    replies.write(struct.pack(">I", len(data)) + data)
    while True:
        try:
            header = read_exact(requests, 4)
            if header is None:
                return
            body = read_exact(requests, struct.unpack(">I", header)[0])
            if body is None:
                return
            req = json.loads(body)
            reply = run_cell(req, ns) if req["op"] == "run" else file_op(req)
            data = json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace")
            replies.write(struct.pack(">I", len(data)) + data)
        except KeyboardInterrupt:
            continue  # an interrupt that came between cells


if __name__ == "__main__":
    main()
