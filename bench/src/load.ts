/** Drives a URL with a real load generator: wrk when it is on PATH, else autocannon. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

import autocannon from "autocannon";

export interface LoadResult {
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly non2xx: number;
  readonly total: number;
}

export interface LoadOptions {
  readonly connections: number;
  readonly durationSeconds: number;
  readonly headers?: Record<string, string>;
  readonly tool: "wrk" | "autocannon";
}

const run = promisify(execFile);

export async function hasWrk(): Promise<boolean> {
  try {
    await run("wrk", ["--version"]).catch((e: { stdout?: string }) => {
      if (!String(e.stdout ?? "").includes("wrk")) throw e;
    });
    return true;
  } catch {
    return false;
  }
}

function wrkDuration(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === "us" ? v / 1000 : m[2] === "ms" ? v : m[2] === "s" ? v * 1000 : v * 60_000;
}

async function withWrk(url: string, o: LoadOptions): Promise<LoadResult> {
  const args = ["-t", "1", "-c", String(o.connections), "-d", `${o.durationSeconds}s`, "--latency"];
  for (const [k, v] of Object.entries(o.headers ?? {})) args.push("-H", `${k}: ${v}`);
  const { stdout } = await run("wrk", [...args, url], { maxBuffer: 1 << 20 });
  const pct = (p: string) => wrkDuration(new RegExp(`^\\s+${p}%\\s+(\\S+)`, "m").exec(stdout)?.[1] ?? "");
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
  const total = Number(/(\d+) requests in/.exec(stdout)?.[1]);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0);
  const errorMatch = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const errors = errorMatch ? errorMatch.slice(1).reduce((s, v) => s + Number(v), 0) : 0;
  return { requestsPerSecond: rps, p50Ms: pct("50"), p99Ms: pct("99"), errors, non2xx, total };
}

async function withAutocannon(url: string, o: LoadOptions): Promise<LoadResult> {
  const result = await autocannon({
    url,
    connections: o.connections,
    duration: o.durationSeconds,
    headers: o.headers,
  });
  return {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    total: result.requests.total,
  };
}

export function load(url: string, options: LoadOptions): Promise<LoadResult> {
  return options.tool === "wrk" ? withWrk(url, options) : withAutocannon(url, options);
}
