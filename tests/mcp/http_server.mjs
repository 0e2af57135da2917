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

// Whether `child` exits within `ms` (the timer is cleared either way: a pending one would keep
// the test process alive after its tests end).
export async function exitWithin(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  let timer;
  const exited = await Promise.race([new Promise((res) => child.once("exit", () => res(true))),
                                     new Promise((res) => { timer = setTimeout(() => res(false), ms); })]);
  clearTimeout(timer);
  return exited;
}

// SIGTERM ends the server (within 20 s, or it is killed and the test that stops it fails).
export async function stopHttpServer(child) {
  for (const sig of ["SIGTERM", "SIGKILL"]) {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(sig);
    if (await exitWithin(child, 20000)) return;
  }
  throw new Error("the server did not stop on SIGTERM");
}
