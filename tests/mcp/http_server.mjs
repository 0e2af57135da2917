// `sandboxrun mcp --http` for the HTTP tests: started on a free loopback port, stopped robustly.
import { spawn } from "node:child_process";

// Starts `BIN mcp --http 127.0.0.1:0 ...args`; resolves to { server, url } once it listens.
export async function startHttpServer(bin, args) {
  const server = spawn(bin, ["mcp", "--http", "127.0.0.1:0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  const url = await new Promise((res, rej) => {
    let err = "";
    server.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/listening on (http:\/\/\S+)/);
      if (m) res(new URL(m[1]));
    });
    server.on("exit", (code) => rej(new Error(`server exited ${code}: ${err}`)));
  });
  return { server, url };
}

// SIGTERM ends the server; one taken by a run's monitor instead (docs/mcp.md) is sent again.
export async function stopHttpServer(child) {
  for (const sig of ["SIGTERM", "SIGTERM", "SIGKILL"]) {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(sig);
    const exited = await Promise.race([new Promise((res) => child.once("exit", () => res(true))),
                                       new Promise((res) => setTimeout(() => res(false), 5000))]);
    if (exited) return;
  }
}
