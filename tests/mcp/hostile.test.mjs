// `sandboxrun mcp` fed what no SDK sends: malformed JSON, a line over the message cap, unknown
// methods, requests before initialize, batches, a flood of calls, and a client that vanishes
// mid-run. Every message gets its JSON-RPC answer, the server keeps serving, nothing is left.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

const BIN = process.env.SANDBOXRUN_BIN;
const CONFIG = process.env.SANDBOXRUN_CONFIG;
const dir = mkdtempSync(join(tmpdir(), "sandboxrun-mcp-hostile-"));
const LOG = join(dir, "audit.log");
after(() => rmSync(dir, { recursive: true, force: true }));

// The server as a raw line protocol: send() writes a line, next(pred) waits for a matching reply.
function server(extra = []) {
  const p = spawn(BIN, ["mcp", "--config", CONFIG, "--audit-log", LOG, ...extra], { stdio: ["pipe", "pipe", "inherit"] });
  const replies = [];
  const waiters = [];
  let buf = "";
  p.stdout.on("data", (d) => {
    buf += d;
    for (let nl; (nl = buf.indexOf("\n")) >= 0; buf = buf.slice(nl + 1)) {
      replies.push(JSON.parse(buf.slice(0, nl)));
      for (const w of [...waiters]) w();
    }
  });
  const exited = new Promise((res) => p.on("exit", (code) => res(code)));
  return {
    p, replies, exited,
    send: (obj) => p.stdin.write((typeof obj === "string" ? obj : JSON.stringify(obj)) + "\n"),
    next: (pred, ms = 30000) => new Promise((res, rej) => {
      const check = () => {
        const i = replies.findIndex(pred);
        if (i >= 0) { waiters.splice(waiters.indexOf(check), 1); res(replies.splice(i, 1)[0]); }
      };
      waiters.push(check);
      check();
      setTimeout(() => rej(new Error("no reply in time; got " + JSON.stringify(replies))), ms);
    }),
  };
}

const init = { jsonrpc: "2.0", id: 0, method: "initialize",
               params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } } };

test("bad messages get JSON-RPC errors and the server goes on", async () => {
  const s = server();
  s.send({ jsonrpc: "2.0", id: 1, method: "tools/list" });
  assert.equal((await s.next((r) => r.id === 1)).error.code, -32600, "before initialize");
  s.send(init);
  assert.equal((await s.next((r) => r.id === 0)).result.protocolVersion, "2025-06-18");
  s.send("{not json");
  assert.equal((await s.next((r) => r.id === null && r.error.code === -32700)).error.code, -32700);
  s.send([{ jsonrpc: "2.0", id: 2, method: "ping" }]);
  assert.equal((await s.next((r) => r.id === null && /batch/.test(r.error.message))).error.code, -32600);
  s.send({ jsonrpc: "2.0", id: 3, method: "no/such/method" });
  assert.equal((await s.next((r) => r.id === 3)).error.code, -32601);
  s.send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "no_such_tool", arguments: {} } });
  assert.equal((await s.next((r) => r.id === 4)).error.code, -32602);
  s.send({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "run_python", arguments: { code: 7 } } });
  assert.equal((await s.next((r) => r.id === 5)).error.code, -32602);
  // 20 MiB on one line: skipped as it streams past (the cap is 16 MiB), then answered.
  s.send({ jsonrpc: "2.0", id: 6, method: "tools/call",
           params: { name: "run_python", arguments: { code: "#" + "x".repeat(20 << 20) } } });
  assert.match((await s.next((r) => r.id === null && /skipped/.test(r.error.message))).error.message, /16777216/);
  // Fields of the wrong type: each an error reply (or ignored), never the end of the server.
  s.send('{"jsonrpc": {"t": {"reason": "reviewed"}}}');
  assert.equal((await s.next((r) => r.id === null && r.error.code === -32600)).error.code, -32600);
  s.send({ jsonrpc: "2.0", id: 8, method: "initialize", params: { protocolVersion: 5, clientInfo: "x", capabilities: [] } });
  assert.equal((await s.next((r) => r.id === 8)).result.serverInfo.name, "sandboxrun");
  s.send({ jsonrpc: "2.0", id: 9, method: "logging/setLevel", params: { level: { deep: true } } });
  assert.equal((await s.next((r) => r.id === 9)).error.code, -32602);
  s.send({ jsonrpc: "2.0", id: 10, method: "tools/call", params: { name: "run_python", arguments: "print(1)" } });
  assert.equal((await s.next((r) => r.id === 10)).error.code, -32602);
  s.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: { x: 1 } } });
  s.send({ jsonrpc: "2.0", id: 7, method: "ping" });
  assert.deepEqual((await s.next((r) => r.id === 7)).result, {});
  s.p.stdin.end();
  assert.equal(await s.exited, 0);
});

test("a flood of calls: each answered once, the overflow refused as busy", async () => {
  const s = server(["--max-concurrent", "2"]);
  s.send(init);
  await s.next((r) => r.id === 0);
  const n = 200;
  for (let i = 1; i <= n; i++)
    s.send({ jsonrpc: "2.0", id: i, method: "tools/call", params: { name: "assess_python", arguments: { code: `x = ${i}` } } });
  const answers = [];
  for (let i = 1; i <= n; i++) answers.push(await s.next((r) => r.id === i));
  assert.equal(answers.length, n);
  const ok = answers.filter((a) => a.result).length;
  const busy = answers.filter((a) => a.error && a.error.code === -32000).length;
  assert.equal(ok + busy, n, JSON.stringify(answers.find((a) => !a.result && a.error.code !== -32000)));
  assert.ok(ok >= 64, `at least the queue's worth ran: ${ok}`);
  s.p.stdin.end();
  assert.equal(await s.exited, 0);
});

test("a client that goes away mid-run leaves nothing running", async () => {
  const s = server();
  s.send(init);
  await s.next((r) => r.id === 0);
  const marker = `vanishing-client-${Date.now()}`;
  const code = `import time\n# ${marker}\ntime.sleep(60)\n`;
  const sha = createHash("sha256").update(code).digest("hex");
  s.send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "run_python", arguments: { code } } });
  // This run's own run_start (the log is shared with the tests before): it is running.
  const records = () => readFileSync(LOG, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  let start;
  for (let i = 0; i < 300 && !start; i++) {
    await new Promise((res) => setTimeout(res, 100));
    start = records().find((r) => r.event === "run_start" && r.code?.sha256 === sha);
  }
  assert.ok(start, "the run started");
  const started = Date.now();
  s.p.stdin.end();
  assert.equal(await s.exited, 0);
  assert.ok(Date.now() - started < 10000, "the server ended at once, its run killed");
  const end = records().find((r) => r.event === "run_end" && r.run_id === start.run_id);
  assert.ok(end, "its run_end is recorded");
  assert.equal(end.status, "error");
});
