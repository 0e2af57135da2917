// The second generation of the official TypeScript SDK (@modelcontextprotocol/client 2.x, the
// one MCP Inspector 2 is built on) as a client of `sandboxrun mcp`, over stdio and over HTTP:
// it negotiates 2025-11-25 with us, lists the tools, runs code and a session.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

import { startHttpServer, stopHttpServer } from "./http_server.mjs";

const BIN = process.env.SANDBOXRUN_BIN;
const CONFIG = process.env.SANDBOXRUN_CONFIG;
const dir = mkdtempSync(join(tmpdir(), "sandboxrun-mcp-v2-"));
const LOG = join(dir, "audit.log");
after(() => rmSync(dir, { recursive: true, force: true }));

async function exercise(transport) {
  const c = new Client({ name: "sandboxrun-v2-test", version: "2.4.0" }, { capabilities: {} });
  await c.connect(transport);
  const { tools } = await c.listTools();
  assert.ok(tools.some((t) => t.name === "run_python"));
  const r = await c.callTool({ name: "run_python", arguments: { code: "print(sum(range(10)))" } });
  assert.match(r.content[0].text, /45/);
  const { structuredContent: { session_id: id } } = await c.callTool({ name: "session_start", arguments: {} });
  await c.callTool({ name: "session_run", arguments: { session_id: id, code: "z = [1, 2, 3]" } });
  const z = await c.callTool({ name: "session_run", arguments: { session_id: id, code: "len(z)" } });
  assert.equal(z.structuredContent.result["text/plain"], "3");
  await c.callTool({ name: "session_stop", arguments: { session_id: id } });
  await c.close();
}

test("over stdio", async () => {
  await exercise(new StdioClientTransport({ command: BIN, args: ["mcp", "--config", CONFIG, "--audit-log", LOG],
                                            stderr: "pipe" }));
});

test("over Streamable HTTP", async () => {
  const { server, url } = await startHttpServer(BIN, ["--config", CONFIG, "--audit-log", LOG]);
  try {
    await exercise(new StreamableHTTPClientTransport(url));
  } finally {
    await stopHttpServer(server);
  }
});
