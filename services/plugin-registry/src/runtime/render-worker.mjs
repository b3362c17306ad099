// The surface renderer's process (docs/adr/0008-surface-rendering.md): renders a
// workspace's entry template with nunjucks, the whole plugin chain on the loader path. It runs in a child
// process of its own (isolate.ts) so that a template that loops, or allocates without bound, can be cut off
// (the registry ends the process after its time limit) without touching the service.
//
// Template names: a plain relative name ("layout.njk") is looked up in each plugin's views/surface/
// directory in chain order; "@<pluginId>/<name>" names one plugin's. Nothing outside those directories can
// be read: absolute names, "..", backslashes and NUL are refused.
//
// Messages: {id, chainKey, roots: [{pluginId, dir}], entry, context} → {id, html} or {id, error}.
/* global setTimeout, process */
import { readFileSync, statSync } from "node:fs";
import { join, sep } from "node:path";

import nunjucks from "nunjucks";

import { globalsChanged, guardTemplates, snapshotGlobals } from "./template-sandbox.mjs";

guardTemplates();

const SAFE = /^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/;

function resolveName(roots, name) {
  let candidates = roots;
  let rel = name;
  const scoped = /^@([a-z][a-z0-9-]{1,62})\/(.+)$/.exec(name);
  if (scoped) {
    candidates = roots.filter((r) => r.pluginId === scoped[1]);
    rel = scoped[2];
  }
  if (!SAFE.test(rel) || rel.split("/").some((s) => s === "." || s === "..")) {
    throw new Error(`template name '${name}' is not a relative path inside the plugin chain`);
  }
  for (const root of candidates) {
    const full = join(root.dir, rel);
    if (!full.startsWith(root.dir + sep)) continue;
    try {
      if (statSync(full).isFile()) return full;
    } catch {
      // not in this plugin
    }
  }
  return null;
}

const ChainLoader = nunjucks.Loader.extend({
  init(roots) {
    this.roots = roots;
  },
  getSource(name) {
    const full = resolveName(this.roots, name);
    if (full === null) return null;
    // Compiled templates are kept by the environment (one per chain of plugin versions, whose files never
    // change), so each file is read and compiled once.
    return { src: readFileSync(full, "utf8"), path: full, noCache: false };
  },
});

// One environment per chain of plugin versions, the most recently used kept.
const environments = new Map();
function environmentFor(chainKey, roots) {
  let env = environments.get(chainKey);
  if (env !== undefined) {
    environments.delete(chainKey);
    environments.set(chainKey, env);
    return env;
  }
  env = new nunjucks.Environment(new ChainLoader(roots), {
    autoescape: true,
    throwOnUndefined: false,
    trimBlocks: false,
  });
  environments.set(chainKey, env);
  while (environments.size > 50) environments.delete(environments.keys().next().value);
  return env;
}

function prepare(context) {
  // HTML snippets are the workspace operator's markup: inserted as they are; text snippets are escaped.
  const snippets = {};
  for (const [key, s] of Object.entries(context.snippets ?? {})) {
    snippets[key] = s.contentType === "text/html" ? nunjucks.runtime.markSafe(s.content) : s.content;
  }
  return { ...context, snippets };
}

// Kept from the start: a template that replaced process.send cannot intercept what is sent.
const send = process.send.bind(process);
const exit = process.exit.bind(process);
const parentPort = { postMessage: (message) => send(message) };
process.on("disconnect", () => exit(0));
const pristine = snapshotGlobals();

/** Answers a render; a render that changed the process's shared state is refused, and the process ends. */
function answer(message) {
  if (globalsChanged(pristine)) {
    send(
      {
        id: message.id,
        error: "the template changed the renderer's globals; its render process is discarded",
        discard: true,
      },
      () => exit(70),
    );
    return;
  }
  parentPort.postMessage(message);
}

process.on("message", (message) => {
  const { id, chainKey, roots, entry, context } = message;
  try {
    const env = environmentFor(chainKey, roots);
    env.render(entry, prepare(context), (error, html) => {
      if (error) answer({ id, error: String(error?.message ?? error).slice(0, 2_000) });
      else answer({ id, html });
    });
  } catch (error) {
    answer({ id, error: String(error?.message ?? error).slice(0, 2_000) });
  }
});

setTimeout(() => parentPort.postMessage({ ready: true }), 0);
