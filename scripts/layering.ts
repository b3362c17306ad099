/**
 * `make lint` runs this: the workspaces' layering, checkable. Every `@svc/*` package a workspace's code
 * imports is declared in its package.json `dependencies`; no shared library imports a service, and no
 * service imports another (they talk over the bus, through contracts in `@svc/contracts`); the declared
 * dependencies form no cycle. Prints each violation and exits 1 when there is one.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

import { repoRoot } from "./lib/stack.js";

interface Workspace {
  readonly name: string;
  readonly dir: string;
  readonly layer: "shared" | "services";
  readonly declared: ReadonlySet<string>;
}

const workspaces = new Map<string, Workspace>();
for (const layer of ["shared", "services"] as const) {
  for (const entry of readdirSync(join(repoRoot, layer))) {
    const dir = join(repoRoot, layer, entry);
    let pkg: { name: string; dependencies?: Record<string, string> };
    try {
      pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as typeof pkg;
    } catch {
      continue;
    }
    workspaces.set(pkg.name, {
      name: pkg.name,
      dir,
      layer,
      declared: new Set(Object.keys(pkg.dependencies ?? {})),
    });
  }
}

/** The source files of a workspace (tests included: they run with the workspace's dependencies). */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (entry === "node_modules") continue;
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (/\.(ts|mts|mjs|js)$/.test(entry)) out.push(path);
  }
  return out;
}

const problems: string[] = [];
for (const ws of workspaces.values()) {
  for (const sub of ["src", "bin"]) {
    let files: string[];
    try {
      files = sources(join(ws.dir, sub));
    } catch {
      continue;
    }
    for (const file of files) {
      const text = readFileSync(file, "utf8");
      for (const match of text.matchAll(/(?:from|import)\s*\(?\s*"(@svc\/[a-z-]+)/g)) {
        const imported = match[1] as string;
        const target = workspaces.get(imported);
        if (imported === ws.name || target === undefined) continue;
        const where = relative(repoRoot, file);
        if (!ws.declared.has(imported))
          problems.push(`${where}: imports ${imported}, not in ${ws.name}'s dependencies`);
        if (target.layer === "services") {
          problems.push(
            `${where}: imports the service ${imported} (services talk over the bus, through @svc/contracts)`,
          );
        }
      }
    }
  }
}

// No cycle among the declared dependencies (depth-first, with the path kept for the message).
const state = new Map<string, "visiting" | "done">();
const visit = (name: string, path: string[]): void => {
  if (state.get(name) === "done") return;
  if (state.get(name) === "visiting") {
    problems.push(`a dependency cycle: ${[...path.slice(path.indexOf(name)), name].join(" -> ")}`);
    return;
  }
  state.set(name, "visiting");
  for (const dep of workspaces.get(name)?.declared ?? [])
    if (workspaces.has(dep)) visit(dep, [...path, name]);
  state.set(name, "done");
};
for (const name of workspaces.keys()) visit(name, []);

for (const problem of problems) process.stderr.write(`layering: ${problem}\n`);
if (problems.length > 0) process.exit(1);
process.stdout.write(
  `layering: ${workspaces.size} workspaces, every @svc import declared, no service imports another, no cycle\n`,
);
