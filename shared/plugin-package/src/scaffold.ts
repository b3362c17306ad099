/**
 * `svc-plugin init <dir>`: a new plugin package that installs, activates and serves as written, with one of
 * each thing a plugin can contribute (routes, a declared key, an event, a browser entry and its style, a
 * surface template, a theme setting) and a test of its backend. Two backends: the entry module the host runs
 * (JavaScript), or a Python process serving the plugin's NATS subject (`"runtime": "external"`).
 */
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";

import { checkRules } from "./author.js";
import { PackageError } from "./files.js";
import { PLUGIN_ID_PATTERN } from "./registry.js";

export interface ScaffoldOptions {
  /** The plugin id; the directory's name when absent. */
  readonly pluginId?: string;
  readonly runtime: "worker" | "external";
}

/** The id registry.json accepts (its schema's pattern). */
const PLUGIN_ID = new RegExp(PLUGIN_ID_PATTERN);

/** `notes-board` → `NotesBoard`. */
const pascal = (id: string) =>
  id
    .split("-")
    .filter((part) => part.length > 0)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join("");

/** The id a directory name gives: lower case, other characters as `-`, starting with a letter. */
export function pluginIdFor(dir: string): string {
  return basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^[^a-z]+/, "")
    .replace(/-+$/, "")
    .slice(0, 63);
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function registryFor(id: string, runtime: ScaffoldOptions["runtime"]) {
  return {
    $schema: "http://localhost:8080/schemas/plugins/registry.schema.json",
    contractVersion: "1.0",
    schemaVersion: "1.0",
    name: pascal(id),
    pluginId: id,
    version: "0.1.0",
    ...(runtime === "external"
      ? { runtime: "external", assemblyFileName: "backend.py", entryTypeName: "backend" }
      : { assemblyFileName: "index.mjs", entryTypeName: `${pascal(id)}Plugin` }),
    dependencies: { host: ">=0.1.0" },
    permissions: [`${id}.note.create`],
    events: [`${id}.note.created`],
    extensions: [{ extensionPointId: "workspace.surface", surface: "workspace" }],
    routes: [
      { method: "GET", path: "/hello", handler: "hello" },
      { method: "POST", path: "/notes", permission: `${id}.note.create`, handler: "createNote" },
    ],
    uiAssets: {
      entries: [{ surface: "workspace", path: `ui/${id}.js` }],
      styles: [{ surface: "workspace", path: `ui/${id}.css` }],
    },
  };
}

const theme = {
  $schema: "http://localhost:8080/schemas/plugins/theme.schema.json",
  surface: "workspace",
  definitions: [
    {
      templateKey: "index",
      displayName: "Home page",
      templatePath: "views/surface/index.njk",
      scope: "workspace",
      priority: 100,
    },
  ],
  config: {
    fields: {
      greeting: { label: "Greeting", type: "text", value: "Hello", group: "Content", order: 1 },
    },
  },
};

const template = (id: string) => `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>{{ workspace.name | default("${pascal(id)}") }}</title>
  </head>
  <body>
    <h1>{{ settings.greeting | default("Hello") }}, {{ workspace.name | default("world") }}!</h1>
    <p>Served by the plugin <code>${id}</code> (views/surface/index.njk).</p>
  </body>
</html>
`;

const uiEntry = (id: string) => `/* global document */
// A browser entry: the UI-asset manifest lists it while the plugin is active, for pages of the workspace
// surface. The workspace context is set by the platform's bootstrap script.
const context = globalThis.__SVC_WORKSPACE_CONTEXT__;
const note = document.createElement("p");
note.className = "${id}-note";
note.textContent = \`${id} is active in \${context?.workspace?.name ?? "this workspace"}\`;
document.body.append(note);
`;

const uiStyle = (id: string) => `.${id}-note {
  font-family: system-ui, sans-serif;
  color: #555;
}
`;

const entryModule = (id: string) => `// @ts-check
/**
 * The backend of plugin ${id}: registry.json's \`entryTypeName\` names this class. The host constructs it in
 * the plugin's own process with the host API, calls \`activate\`, then the methods registry.json's routes
 * name, and \`deactivate\` before unloading it. The types are in the plugin SDK (docs/sdk/plugin-sdk.d.ts).
 */
export class ${pascal(id)}Plugin {
  constructor(host) {
    this.host = host;
    this.notes = [];
  }

  async activate() {
    this.host.log.info("${id} is active", { version: this.host.version });
  }

  async deactivate() {}

  /** GET /api/plugins/${id}/hello?name=…: any signed-in caller. */
  async hello(request) {
    const name = typeof request.query.name === "string" ? request.query.name.slice(0, 100) : "world";
    return { status: 200, body: { message: \`Hello, \${name}!\`, caller: request.principal.subject } };
  }

  /**
   * POST /api/plugins/${id}/notes {"text": "…"}: the key ${id}.note.create. Publishes ${id}.note.created
   * into the caller's workspace (a platform session may name one as \`workspaceKey\`).
   */
  async createNote(request) {
    const body = request.body ?? {};
    if (typeof body.text !== "string" || body.text.length === 0 || body.text.length > 1000) {
      return { status: 400, body: { detail: "text: 1 to 1000 characters" } };
    }
    const principal = request.principal;
    const workspaceKey =
      principal.scope === "workspace"
        ? principal.workspaceKey
        : typeof body.workspaceKey === "string"
          ? body.workspaceKey
          : null;
    const note = { id: this.notes.length + 1, text: body.text };
    this.notes.push(note);
    await this.host.events.publish("${id}.note.created", workspaceKey, note);
    return { status: 201, body: note };
  }
}
`;

const entryTest = (id: string) => `// The backend's test, with Node's own runner: node --test
// It constructs the plugin with a stand-in for the host API and calls its handlers as the host does.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ${pascal(id)}Plugin } from "../index.mjs";

function host() {
  const published = [];
  const log = { debug() {}, info() {}, warn() {}, error() {} };
  return {
    published,
    api: {
      pluginId: "${id}",
      version: "0.1.0",
      log,
      events: {
        publish: async (eventName, workspaceKey, payload) => {
          published.push({ eventName, workspaceKey, payload });
        },
        decorate() {},
      },
    },
  };
}

const platform = { subject: "u-1", scope: "platform", workspaceKey: null, roles: [], permissions: [] };

test("hello greets the name asked for", async () => {
  const plugin = new ${pascal(id)}Plugin(host().api);
  await plugin.activate();
  const answer = await plugin.hello({ query: { name: "Ada" }, principal: platform });
  assert.deepEqual(answer, { status: 200, body: { message: "Hello, Ada!", caller: "u-1" } });
});

test("createNote publishes ${id}.note.created into the caller's workspace", async () => {
  const h = host();
  const plugin = new ${pascal(id)}Plugin(h.api);
  const member = { ...platform, scope: "workspace", workspaceKey: "default" };
  const answer = await plugin.createNote({ body: { text: "hi" }, principal: member });
  assert.equal(answer.status, 201);
  assert.deepEqual(h.published, [
    { eventName: "${id}.note.created", workspaceKey: "default", payload: { id: 1, text: "hi" } },
  ]);
  assert.equal((await plugin.createNote({ body: {}, principal: member })).status, 400);
});
`;

const pythonBackend = (id: string) => `"""
The backend of plugin ${id}, outside the platform's runtime ("runtime": "external" in registry.json): it
serves the plugin's routes on its NATS subject and publishes its event (docs/wire-contract.md).

    pip install -r requirements.txt
    NATS_URL=nats://127.0.0.1:4222 python3 backend.py

On a bus that requires credentials, ask the platform for this plugin's (POST /api/plugins/${id}/credentials)
and set NATS_CREDS to the saved .creds file and NATS_INBOX_PREFIX to the answer's subjects.inboxPrefix.
"""
import asyncio
import json
import os
import uuid

PLUGIN_ID = "${id}"
PREFIX = os.environ.get("SVC_SUBJECT_PREFIX", "svc")


def handle(request, notes):
    """One route call: (the reply, the events to publish as (name, workspaceKey, payload))."""
    handler = request["route"]["handler"]
    principal = request.get("principal") or {}
    if handler == "hello":
        name = str((request.get("query") or {}).get("name", "world"))[:100]
        return {"status": 200, "body": {"message": f"Hello, {name}!", "caller": principal.get("subject")}}, []
    if handler == "createNote":
        body = request.get("body") or {}
        text = body.get("text")
        if not isinstance(text, str) or not 0 < len(text) <= 1000:
            return {"status": 400, "body": {"detail": "text: 1 to 1000 characters"}}, []
        if principal.get("scope") == "workspace":
            workspace = principal.get("workspaceKey")
        else:
            workspace = body.get("workspaceKey") if isinstance(body.get("workspaceKey"), str) else None
        note = {"id": len(notes) + 1, "text": text}
        notes.append(note)
        return {"status": 201, "body": note}, [(f"{PLUGIN_ID}.note.created", workspace, note)]
    return {"status": 404}, []


async def main():
    import nats  # pip install nats-py

    options = {"servers": os.environ.get("NATS_URL", "nats://127.0.0.1:4222")}
    if os.environ.get("NATS_CREDS"):
        options["user_credentials"] = os.environ["NATS_CREDS"]
        options["inbox_prefix"] = os.environ.get("NATS_INBOX_PREFIX", f"_INBOX_plugin_{PLUGIN_ID}")
    nc = await nats.connect(**options)
    js = nc.jetstream()
    notes = []

    async def on_request(msg):
        reply, events = handle(json.loads(msg.data), notes)
        for name, workspace, payload in events:
            headers = {"Nats-Msg-Id": str(uuid.uuid4()), "Svc-Event-Source": f"plugin:{PLUGIN_ID}"}
            if workspace is not None:
                headers["Svc-Workspace-Key"] = workspace
            await js.publish(f"{PREFIX}.events.{name}", json.dumps(payload).encode(), headers=headers)
        await msg.respond(json.dumps(reply).encode())

    await nc.subscribe(f"{PREFIX}.plugins.{PLUGIN_ID}.http", queue=f"plugin.{PLUGIN_ID}", cb=on_request)
    print(f"{PLUGIN_ID}: serving {PREFIX}.plugins.{PLUGIN_ID}.http", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
`;

const pythonTest = (
  id: string,
) => `# The backend's test, with Python's own runner: python3 -m unittest discover test
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from backend import handle  # noqa: E402

PLATFORM = {"subject": "u-1", "scope": "platform", "workspaceKey": None, "roles": [], "permissions": []}


class HandleTest(unittest.TestCase):
    def test_hello_greets_the_name_asked_for(self):
        reply, events = handle({"route": {"handler": "hello"}, "query": {"name": "Ada"}, "principal": PLATFORM}, [])
        self.assertEqual(reply, {"status": 200, "body": {"message": "Hello, Ada!", "caller": "u-1"}})
        self.assertEqual(events, [])

    def test_create_note_publishes_into_the_callers_workspace(self):
        member = dict(PLATFORM, scope="workspace", workspaceKey="default")
        reply, events = handle({"route": {"handler": "createNote"}, "body": {"text": "hi"}, "principal": member}, [])
        self.assertEqual(reply["status"], 201)
        self.assertEqual(events, [("${id}.note.created", "default", {"id": 1, "text": "hi"})])
        bad, _ = handle({"route": {"handler": "createNote"}, "body": {}, "principal": member}, [])
        self.assertEqual(bad["status"], 400)


if __name__ == "__main__":
    unittest.main()
`;

/** The files of a new plugin, by path. */
export function scaffoldFiles(id: string, runtime: ScaffoldOptions["runtime"]): Record<string, string> {
  const shared = {
    "registry.json": json(registryFor(id, runtime)),
    "theme.json": json(theme),
    "views/surface/index.njk": template(id),
    [`ui/${id}.js`]: uiEntry(id),
    [`ui/${id}.css`]: uiStyle(id),
  };
  return runtime === "external"
    ? {
        ...shared,
        "backend.py": pythonBackend(id),
        "requirements.txt": "nats-py>=2.6\n",
        "test/test_backend.py": pythonTest(id),
      }
    : { ...shared, "index.mjs": entryModule(id), "test/plugin.test.mjs": entryTest(id) };
}

/** Writes a new plugin into `dir` (absent or empty); the plugin id and the paths written. */
export async function scaffold(
  dir: string,
  options: ScaffoldOptions,
): Promise<{ pluginId: string; files: string[] }> {
  const id = options.pluginId ?? pluginIdFor(dir);
  if (!PLUGIN_ID.test(id)) {
    throw new PackageError(
      `'${id}' is not a plugin id (lower case letters, digits and '-', starting with a letter, 2 to 63 characters): name one with --id.`,
    );
  }
  const existing = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw new PackageError(`Cannot use '${dir}': ${error.code ?? error.message}.`);
  });
  if (existing.length > 0) throw new PackageError(`'${dir}' is not empty: init writes a new directory.`);
  const files = scaffoldFiles(id, options.runtime);
  // An id the host reserves (user, tenant, …) is refused here, before anything is written.
  checkRules(JSON.parse(files["registry.json"] as string));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return { pluginId: id, files: Object.keys(files).sort() };
}
