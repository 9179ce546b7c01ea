// A real `delayq serve` for the scenario tests: the binary is built once per
// test run from the repository this package is in (or taken from
// DELAYQ_BIN), and each server runs the local backend in a temporary data
// directory on a port chosen at run time, without NATS or the web UI.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** REPO_ROOT is the repository root: this file is clients/typescript/dist/test/server.js once compiled. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

let binary: Promise<string> | undefined;
const tempDirs: string[] = [];

/** running holds the servers this process started and has not seen exit, killed by pid if it exits first (a test that timed out). */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const p of running) {
    try {
      process.kill(p.pid!, "SIGKILL");
    } catch {
      // Gone already.
    }
  }
});

/** delayqBinary returns the path of the delayq binary, building it the first time. */
export function delayqBinary(): Promise<string> {
  binary ??= (async () => {
    if (process.env.DELAYQ_BIN) {
      return process.env.DELAYQ_BIN;
    }
    const dir = await tempDir("delayq-ts-bin-");
    const out = join(dir, "delayq");
    await new Promise<void>((res, rej) =>
      execFile("go", ["build", "-o", out, "./cmd/delayq"], { cwd: REPO_ROOT }, (err, _stdout, stderr) =>
        err ? rej(new Error(`go build ./cmd/delayq in ${REPO_ROOT}: ${err.message}\n${stderr}`)) : res(),
      ),
    );
    return out;
  })();
  return binary;
}

/** tempDir makes a temporary directory removed by cleanup. */
export async function tempDir(prefix: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

/** cleanup removes the temporary directories (the built binary's too). */
export async function cleanup(): Promise<void> {
  await Promise.all(tempDirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

/** Server is one running `delayq serve`. */
export class Server {
  #proc?: ChildProcess;
  #exited?: Promise<void>;
  #log: string[] = [];
  port = 0;

  private constructor(readonly dataDir: string) {}

  /** url is the server's HTTP API. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** start starts a server on a fresh data directory and a free port, and resolves once it is ready. */
  static async start(): Promise<Server> {
    const s = new Server(await tempDir("delayq-ts-data-"));
    await s.#start();
    return s;
  }

  async #start(): Promise<void> {
    const bin = await delayqBinary();
    const proc = spawn(
      bin,
      ["serve", "--data", this.dataDir, "--http", `127.0.0.1:${this.port}`, "--nats-listen", "off", "--drain-timeout", "0", "--ui", "off"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.#proc = proc;
    running.add(proc);
    this.#exited = new Promise((res) =>
      proc.once("exit", () => {
        running.delete(proc);
        res();
      }),
    );
    const listening = new Promise<number>((res, rej) => {
      let buf = "";
      const onData = (chunk: Buffer) => {
        buf += chunk.toString("utf8");
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          this.#log.push(line);
          const m = /msg="http listening" addr=127\.0\.0\.1:(\d+)/.exec(line);
          if (m) {
            res(Number(m[1]));
          }
        }
      };
      proc.stdout!.on("data", onData);
      proc.stderr!.on("data", onData);
      proc.once("exit", (code) => rej(new Error(`delayq serve exited (${code}) before listening:\n${this.#log.join("\n")}`)));
    });
    this.port = await listening;
    await this.#ready();
  }

  /** ready polls /readyz until the server answers 200. */
  async #ready(): Promise<void> {
    for (;;) {
      try {
        const res = await fetch(this.url + "/readyz");
        await res.arrayBuffer();
        if (res.status === 200) {
          return;
        }
      } catch {
        // Not accepting yet.
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** stop sends SIGTERM to the server this test started, by its pid, and resolves once it has exited. */
  async stop(): Promise<void> {
    const p = this.#proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      process.kill(p.pid!, "SIGTERM");
    }
    await this.#exited;
  }

  /** restart starts the server again on the same port and data directory. */
  async restart(): Promise<void> {
    await this.stop();
    await this.#start();
  }

  /** log returns what the server logged so far. */
  log(): string {
    return this.#log.join("\n");
  }
}
