#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs
that let libFuzzer start past checksums and framing (a tar header's checksum, a TLS record, a
hash-chained audit line) instead of at one random byte. The files are committed; rerun this
after changing a format, then commit what changed:  python3 tests/fuzz/make_corpus.py
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import ssl
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    with open(os.path.join(OUT, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def tar_layer(fmt, long_names=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        def add(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, link=""):
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.mtime, ti.linkname, ti.size = kind, mode, 1700000000, link, len(data)
            t.addfile(ti, io.BytesIO(data) if data else None)
        add("etc", tarfile.DIRTYPE, mode=0o755)
        add("etc/os-release", data=b"ID=fuzz\n")
        add("etc/hosts.link", tarfile.SYMTYPE, link="os-release", mode=0o777)
        add("etc/hard", tarfile.LNKTYPE, link="etc/os-release")
        add("usr/bin/tool", data=b"#!/bin/sh\n", mode=0o4755)
        add("gone/.wh.old")
        add("opaque/.wh..wh..opq")
        if long_names:
            add("d/" + "n" * 120 + "/file", data=b"long")
    return buf.getvalue()


def layers():
    put("image_layer", "gnu.tar", tar_layer(tarfile.GNU_FORMAT, long_names=True))
    put("image_layer", "pax.tar", tar_layer(tarfile.PAX_FORMAT, long_names=True))
    put("image_layer", "ustar.tar", tar_layer(tarfile.USTAR_FORMAT))
    # Two gzip members, as some tools write them: one stream.
    pax = tar_layer(tarfile.PAX_FORMAT)
    put("image_layer", "pax.tar.gz", gzip.compress(pax[:1024], mtime=0) + gzip.compress(pax[1024:], mtime=0))


def seccomp():
    for name in ("default.json", "untrusted.json"):
        shutil.copy(os.path.join(ROOT, "policies", name), os.path.join(OUT, "seccomp_profile", name))
    put("seccomp_profile", "small.json", json.dumps({
        "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
        "syscalls": [
            {"names": ["read", "write", "exit_group"], "action": "SCMP_ACT_ALLOW"},
            {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]},
            {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ"}],
             "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
            {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
             "includes": {"minKernel": "4.8"}}]}, indent=1))


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def audit():
    prev = "0" * 64
    events = [
        ("assessment", {"level": "LOW", "score": 0, "code": {"name": "job.py", "sha256": "ab" * 32, "size": 12}}),
        ("run_start", {"trust_used": "untrusted", "limits": {"cpu_count": 1.0, "mem_limit_bytes": 268435456}}),
        ("network", {"host": "pypi.org", "port": 443, "verdict": "allowed", "bytes_down": 1024}),
        ("run_end", {"status": "exited", "exit_code": 0, "duration_ms": 73, "note": "caf\u00e9 \u2713"}),
    ]
    for seq, (event, fields) in enumerate(events, 1):
        rec = dict(fields, event=event, prev=prev, run_id="834ff057317211d3504058f0d14baded", seq=seq,
                   ts="2026-11-23T21:43:17.123456Z")
        prev = hashlib.sha256(canonical(rec).encode()).hexdigest()
        rec["hash"] = prev
        put("audit_parser", f"{seq}-{event}.jsonl", canonical(rec))


def http():
    reqs = {
        "connect": "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nProxy-Connection: keep-alive\r\n\r\n",
        "get": "GET http://pypi.test/simple/requests/ HTTP/1.1\r\nHost: pypi.test\r\nUser-Agent: pip/23.0\r\n"
               "Accept: text/html\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n\r\n",
        "post": "POST http://10.1.2.3:8080/upload?x=1 HTTP/1.0\r\nHost: 10.1.2.3:8080\r\nContent-Length: 5\r\n\r\nhello",
        "ipv6": "CONNECT [fd00::1]:443 HTTP/1.1\r\nHost: [fd00::1]:443\r\n\r\n",
    }
    for name, text in reqs.items():
        put("net_http", name + ".txt", text)


def client_hello(server_name):
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(incoming, outgoing, server_hostname=server_name)
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def sni():
    put("net_sni", "pypi.org.bin", client_hello("pypi.org"))
    put("net_sni", "files.pythonhosted.org.bin", client_hello("files.pythonhosted.org"))
    put("net_sni", "host.txt", "Files.PythonHosted.org.")


def python_sources():
    # A few of each kind of assessor fixture: enough variety to seed, without a second copy of all.
    srcs = [os.path.join(ROOT, "examples", "hello.py")]
    fixtures = os.path.join(ROOT, "tests", "fixtures", "assess")
    for kind in sorted(os.listdir(fixtures)):
        d = os.path.join(fixtures, kind)
        if os.path.isdir(d):
            srcs += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".py")][:4]
    for src in srcs:
        rel = os.path.relpath(src, ROOT).replace(os.sep, "_")
        shutil.copy(src, os.path.join(OUT, "assess_analyzer", rel))


def session_replies():
    # Replies of the session driver (src/session/driver.py) to cell 1, as it writes them.
    base = {"id": 1, "status": "ok", "stdout": "a\n", "stderr": "", "stdout_truncated": False,
            "stderr_truncated": False, "result": {"text/plain": "2"}, "display": [], "error": None}
    put("session_reply", "ok.json", json.dumps(base))
    put("session_reply", "display.json", json.dumps(dict(base, display=[
        {"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="}, {"text/plain": "T()", "text/html": "<b>t</b>"}])))
    put("session_reply", "error.json", json.dumps(dict(base, status="error", result=None, error={
        "ename": "ZeroDivisionError", "evalue": "division by zero",
        "traceback": ["Traceback (most recent call last):\n", '  File "<cell 1>", line 1, in <module>\n']})))


def mcp_messages():
    # JSON-RPC messages as an MCP client sends them (src/mcp/message.hpp), one per file.
    msgs = {
        "initialize.json": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "c", "version": "1"}}},
        "initialized.json": {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "call.json": {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": "print(1)"}, "_meta": {"progressToken": 7}}},
        "cancelled.json": {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}},
        "response.json": {"jsonrpc": "2.0", "id": "sandboxrun-elicit-1", "result": {
            "action": "accept", "content": {"reason": "reviewed"}}},
        "error.json": {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}},
    }
    for name, m in msgs.items():
        put("mcp_message", name, json.dumps(m))
    put("mcp_message", "batch.json", json.dumps([msgs["initialized.json"]]))


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    for target in ("image_layer", "seccomp_profile", "audit_parser", "net_http", "net_sni", "assess_analyzer",
                   "session_reply", "mcp_message"):
        os.makedirs(os.path.join(OUT, target))
    layers()
    seccomp()
    audit()
    http()
    sni()
    python_sources()
    session_replies()
    mcp_messages()
