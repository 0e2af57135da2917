// `sandboxrun mcp` driven by the official MCP Inspector's CLI mode (`mcp-inspector --cli`), a
// client nobody here wrote, run as a command the way a person would: tools listed, a run, a verdict.
// Run by ctest (Mcp.OfficialSdk) with SANDBOXRUN_BIN and SANDBOXRUN_CONFIG set; `npm ci` in
// tests/mcp/inspector installs the pinned inspector.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

const BIN = process.env.SANDBOXRUN_BIN;
const CONFIG = process.env.SANDBOXRUN_CONFIG;
assert.ok(BIN && CONFIG, "set SANDBOXRUN_BIN and SANDBOXRUN_CONFIG");
const INSPECTOR_DIR = join(dirname(fileURLToPath(import.meta.url)), "inspector");
const INSPECTOR = join(INSPECTOR_DIR, "node_modules", ".bin", "mcp-inspector");
const dir = mkdtempSync(join(tmpdir(), "sandboxrun-inspector-test-"));
const LOG = join(dir, "audit.log");
after(() => rmSync(dir, { recursive: true, force: true }));

// One inspector run: it starts the server, makes one request, prints the result as JSON, exits.
// The server's command goes after `--` (the launcher takes --config for its own config file), and
// the method's options after the command (--tool-arg takes every argument after it).
async function inspect(method, ...options) {
  assert.ok(existsSync(INSPECTOR),
            `the MCP Inspector is not installed: run \`npm ci\` in ${INSPECTOR_DIR} (scripts/test.sh does it)`);
  const argv = ["--cli", "--", BIN, "mcp", "--config", CONFIG, "--audit-log", LOG, "--method", method, ...options];
  const child = spawn(INSPECTOR, argv, { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "", stderr = "", timedOut = false;
  child.stdout.on("data", (d) => { stdout += d; });
  child.stderr.on("data", (d) => { stderr += d; });
  // SIGINT: the launcher then kills the CLI it started, which closes the server's stdin.
  const timer = setTimeout(() => { timedOut = true; child.kill("SIGINT"); }, 60000);
  const [code, signal] = await once(child, "close");
  clearTimeout(timer);
  const what = `mcp-inspector --cli --method ${method}`;
  assert.ok(!timedOut, `${what} took over 60 s: ${stderr}${stdout}`);
  assert.equal(code, 0, `${what} failed (exit ${code ?? signal}): ${stderr}${stdout}`);
  try {
    return JSON.parse(stdout);
  } catch {
    assert.fail(`${what} printed no JSON: ${stdout}${stderr}`);
  }
}

test("the inspector lists the tools", async () => {
  const { tools } = await inspect("tools/list");
  const names = tools.map((t) => t.name);
  for (const name of ["run_python", "assess_python", "session_start"]) assert.ok(names.includes(name), name);
});

test("the inspector runs Python through run_python", async () => {
  const r = await inspect("tools/call", "--tool-name", "run_python", "--tool-arg", "code=print(6*7)");
  assert.equal(r.isError, false, JSON.stringify(r.content));
  assert.match(r.content[0].text, /\b42\b/);
  assert.equal(r.structuredContent.status, "exited");
  assert.equal(r.structuredContent.stdout, "42\n");
  // The server's own arguments reached it: the run is in the audit log given after `--`.
  const starts = readFileSync(LOG, "utf8").trim().split("\n").map((l) => JSON.parse(l))
    .filter((rec) => rec.event === "run_start" && rec.run_id === r.structuredContent.run_id);
  assert.equal(starts.length, 1);
  assert.equal(starts[0].caller, "mcp:inspector-cli");
});

test("the inspector gets assess_python's verdict", async () => {
  const r = await inspect("tools/call", "--tool-name", "assess_python", "--tool-arg", 'code=import os; os.system("rm -rf /")');
  assert.equal(r.isError, false, JSON.stringify(r.content));
  assert.equal(r.structuredContent.level, "BLOCKED");
  assert.ok(r.structuredContent.score > 0);
  assert.ok(r.structuredContent.findings.some((f) => f.severity === "critical"), JSON.stringify(r.structuredContent));
  assert.match(r.content[0].text, /^BLOCKED \(score \d+\)/);
});
