// The plugin runtime's worker (docs/adr/0007-plugin-runtime.md): one child process per active
// plugin, with its own heap limit (started by isolate.ts; its data is the first argument, its messages go
// over the IPC channel). It loads the plugin's entry module (verified by the registry a moment
// before), creates the entry object with the host API, and serves the plugin's subject itself with its
// own NATS connection (docs/wire-contract.md), so a request crosses no other thread. Plain JavaScript, so
// that it loads the same way from the sources, under the tests and from dist/.
//
// A worker starts as a spare (the NATS client loaded and connected) and becomes a plugin's on "load", which
// keeps activation fast (docs/adr/0007-plugin-runtime.md).
//
// Messages from the registry: {type:"load", plugin}, {type:"ping", id}, {type:"stop"},
// {type:"published", id, error?}.
// Messages to it: {type:"ready", handlers}, {type:"failed", error}, {type:"pong", id},
// {type:"publish", id, event}, {type:"log", …}, {type:"stopped"}.
/* global TextDecoder, TextEncoder, setTimeout, clearTimeout, process */
import { AsyncLocalStorage } from "node:async_hooks";
import { createPrivateKey, sign } from "node:crypto";

import { connect, headers as natsHeaders } from "@nats-io/transport-node";

// natsAuth: how this process authenticates to NATS: "none" (an open server: the spare
// connects at once), "shared" (one user for every plugin process: its credentials come over IPC,
// {type:"nats-auth"}, first; the spare connects then) or "per-plugin" (the plugin's own short-lived
// credentials come with "load"; the process connects then, and "nats-auth" later renews them).
// inboxPrefix: where replies to this process's requests arrive (its user may read that inbox only).
const { natsServers, natsAuth, inboxPrefix: spareInbox } = JSON.parse(process.argv[2] ?? "{}");
const port = {
  postMessage: (message) => process.send?.(message),
  on: (event, listener) => process.on(event, listener),
};
// The registry went away: so does this process.
process.on("disconnect", () => process.exit(0));
// A throw outside a handler (a timer, an event) ends the plugin: said first, then exit.
process.on("uncaughtException", (error) => {
  process.send?.({ type: "crashed", error: describe(error) }, () => process.exit(1));
});
process.on("unhandledRejection", (error) => {
  process.send?.({ type: "crashed", error: describe(error) }, () => process.exit(1));
});
// Set by "load": entryUrl, entryTypeName, pluginId, version, and the subject and queue it serves (none
// for a worker without NATS).
let plugin;

// Credentials and TLS as the registry sent them (the contents of its files: this process reads none).
// Read at every (re)connect, so a renewal applies to the next one.
let auth = null;
let inbox = spareInbox;
const encode = (text) => new TextEncoder().encode(text);
// The user's private key, parsed once per credentials (a renewal brings new ones).
let userKey = null;
function setAuth(next) {
  auth = next ?? null;
  userKey = auth?.key ? createPrivateKey(auth.key.privateKeyPem) : null;
}
function authenticate(nonce) {
  const a = auth ?? {};
  // A minted user or the plugins user: the nonce signed with node:crypto's Ed25519 (the nkeys library's
  // JavaScript one costs tens of milliseconds in a process that has not run it yet, and leaves it some
  // 6 MB larger for good), in standard base64 as nats.js and the services send it.
  if (a.key && userKey !== null) {
    const sig = nonce ? sign(null, encode(nonce), userKey).toString("base64") : "";
    return { ...(a.jwt ? { jwt: a.jwt } : {}), nkey: a.key.publicKey, sig };
  }
  // An open server, or one that knows this process by its client certificate alone.
  return {};
}
const connectOptions = (name) => ({
  servers: natsServers,
  name,
  maxReconnectAttempts: -1,
  reconnectTimeWait: 500,
  waitOnFirstConnect: false,
  timeout: 5_000,
  ...(inbox ? { inboxPrefix: inbox } : {}),
  authenticator: authenticate,
  ...(auth?.tls ? { tls: auth.tls } : {}),
});
// What the server refuses this process (a permissions violation) is said to the registry, which logs it
// with the plugin's id.
async function watch(connection) {
  for await (const s of connection.status()) {
    if (s.type === "error" && s.error?.name === "PermissionViolationError") {
      log("error", `NATS refused a ${s.error.operation} on '${s.error.subject}'`, { nats: s.error.message });
    }
  }
}
// The spare connects at once when it can (once shared credentials arrived, when it needs some); a failed
// early connect is tried again at load.
let connecting = null;
const beginConnecting = (name = "svc-plugin-runtime") => {
  connecting = natsServers ? connect(connectOptions(name)).catch(() => null) : null;
};
if (natsAuth === "none") beginConnecting();
let nextPublish = 0;
const publishing = new Map();

function describe(error) {
  if (error instanceof Error) return { message: error.message, name: error.name };
  return { message: String(error), name: "Error" };
}

/**
 * A load failure, with the package file and line it comes from when the stack names one (a syntax error
 * in a module, an exception thrown while it is evaluated or activated): `index.mjs:3: Unexpected token`.
 */
function describeLoad(error) {
  const described = describe(error);
  const stack = error instanceof Error ? String(error.stack ?? "") : "";
  const base = plugin?.packageUrl;
  if (!base) return described;
  const escaped = base.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const at = new RegExp(`${escaped}([^\\s:)]+):(\\d+)`).exec(stack);
  if (at === null) return described;
  const where = `${decodeURIComponent(at[1])}:${at[2]}`;
  return { ...described, message: `${where}: ${described.name}: ${described.message}`, location: where };
}

function log(level, message, data) {
  port.postMessage({ type: "log", level, message: String(message), data: data ?? null });
}

// The publisher contract: publish(eventName, workspaceKey, payload). Decorators wrap it in the
// order they were added: each gets the event and `next`; it may change the event or drop it (not call next).
const decorators = [];
// The trace of the request being handled (its `traceparent`, when the caller traces): an event the
// handler publishes continues it. The process cannot load OpenTelemetry: the host makes the spans.
const tracing = new AsyncLocalStorage();
function send(event) {
  const id = ++nextPublish;
  const traceparent = tracing.getStore();
  return new Promise((resolve, reject) => {
    publishing.set(id, { resolve, reject });
    port.postMessage({ type: "publish", id, event, ...(traceparent ? { traceparent } : {}) });
  });
}
function publish(eventName, workspaceKey, payload) {
  const run = (index, event) =>
    index === decorators.length
      ? send(event)
      : Promise.resolve(decorators[index](event, (next) => run(index + 1, next)));
  return run(0, { eventName, workspaceKey: workspaceKey ?? null, payload: payload ?? {} });
}

const hostApi = () =>
  Object.freeze({
    pluginId: plugin.pluginId,
    version: plugin.version,
    log: Object.freeze({
      debug: (m, d) => log("debug", m, d),
      info: (m, d) => log("info", m, d),
      warn: (m, d) => log("warn", m, d),
      error: (m, d) => log("error", m, d),
    }),
    events: Object.freeze({
      publish,
      decorate(decorator) {
        if (typeof decorator !== "function") throw new TypeError("a publisher decorator is a function");
        decorators.push(decorator);
      },
    }),
  });

let entry;

async function start() {
  const { entryUrl, entryTypeName } = plugin;
  const host = hostApi();
  const entryFile =
    plugin.packageUrl && entryUrl.startsWith(plugin.packageUrl)
      ? decodeURIComponent(entryUrl.slice(plugin.packageUrl.length))
      : entryUrl;
  const module = await import(entryUrl);
  const exported = module[entryTypeName];
  if (exported === undefined) {
    const names = Object.keys(module);
    throw new Error(
      `the entry module ${entryFile} has no export '${entryTypeName}' (registry.json's entryTypeName); ` +
        (names.length === 0 ? "it exports nothing" : `it exports ${names.map((n) => `'${n}'`).join(", ")}`),
    );
  }
  // A class is constructed with the host API; a factory function is called with it; an object is used.
  if (typeof exported === "function") {
    entry = /^class[\s{]/.test(Function.prototype.toString.call(exported))
      ? new exported(host)
      : await exported(host);
  } else {
    entry = exported;
  }
  if (entry === null || typeof entry !== "object") throw new Error(`'${entryTypeName}' gave no object`);
  if (typeof entry.activate === "function") await entry.activate(host);
  const handlers = [];
  for (let o = entry; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) {
      if (name !== "constructor" && typeof entry[name] === "function") handlers.push(name);
    }
  }
  if (plugin.subject) await listen();
  port.postMessage({ type: "ready", handlers: [...new Set(handlers)] });
}

// A handler's result as the wire reply {status, headers, body}: a value with a numeric `status` is one
// already; any other value is a 200 JSON body, null or undefined a 204.
function toReply(value) {
  if (value !== null && typeof value === "object" && typeof value.status === "number") {
    const status =
      Number.isInteger(value.status) && value.status >= 200 && value.status <= 599 ? value.status : 500;
    const headers = {};
    if (value.headers !== null && typeof value.headers === "object") {
      for (const [name, h] of Object.entries(value.headers)) {
        if (typeof h === "string" && /^[a-z0-9-]{1,64}$/i.test(name)) headers[name.toLowerCase()] = h;
      }
    }
    return value.body === undefined ? { status, headers } : { status, headers, body: value.body };
  }
  return value === null || value === undefined ? { status: 204 } : { status: 200, body: value };
}

const decoder = new TextDecoder();
let nc;

// A platform error reply (docs/wire-contract.md): the code in Svc-Error-Code, the problem's detail in the body.
function respondError(msg, code, status, detail) {
  if (!msg.reply) return;
  const h = natsHeaders();
  h.set("Svc-Error-Code", code);
  h.set("Nats-Service-Error-Code", String(status));
  h.set("Nats-Service-Error", detail);
  msg.respond(JSON.stringify({ detail }), { headers: h });
}

// One request on the plugin's subject: the handler the route names runs with the parsed request, within
// the request's deadline (the gateway sets it from BackendHost__PluginCallTimeoutMs; 30 s without one).
async function serve(msg) {
  const deadline = Number(msg.headers?.get("Svc-Deadline"));
  const left = Number.isFinite(deadline) && deadline > 0 ? deadline - Date.now() : 30_000;
  if (left <= 0) return; // the caller has given up
  const timeoutMs = Math.max(1, Math.min(left, 30_000));
  const traceparent = msg.headers?.get("traceparent") || undefined;
  const started = Date.now();
  let handlerName = "";
  let outcome = "ok";
  let timer;
  try {
    const request = JSON.parse(decoder.decode(msg.data));
    const handler = request?.route?.handler;
    handlerName = typeof handler === "string" ? handler : "";
    const fn = typeof handler === "string" ? entry?.[handler] : undefined;
    if (typeof fn !== "function") throw new Error(`the plugin has no handler '${String(handler)}'`);
    const expired = new Promise((_resolve, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error("timeout"), { timeout: true })), timeoutMs);
    });
    const value = await Promise.race([tracing.run(traceparent, () => fn.call(entry, request)), expired]);
    msg.respond(JSON.stringify(toReply(value)));
  } catch (error) {
    outcome = error?.timeout === true ? "timeout" : "failed";
    if (error?.timeout === true) {
      respondError(msg, "SVC_TIMEOUT", 504, `The plugin did not answer within ${timeoutMs} ms.`);
    } else {
      log("warn", "a route handler failed", describe(error));
      // The plugin's own message stays in the log: it may hold anything.
      respondError(msg, "SVC_PLUGIN_FAILED", 502, "The plugin failed to handle the request.");
    }
  } finally {
    clearTimeout(timer);
    // The handler's time, for the host to record as a span of the caller's trace.
    if (traceparent)
      port.postMessage({
        type: "span",
        traceparent,
        handler: handlerName,
        started,
        ended: Date.now(),
        outcome,
      });
  }
}

// Takes the plugin's requests on `connection`; rejects when the server refuses the subscription.
async function subscribeOn(connection) {
  let refused = null;
  connection.subscribe(plugin.subject, {
    queue: plugin.queue,
    callback: (err, msg) => {
      if (err === null) void serve(msg);
      else refused = err;
    },
  });
  // The server answers the subscription (a refusal) before the flush's PONG.
  await connection.flush();
  if (refused !== null) {
    throw new Error(`NATS refused the plugin's subscription to '${plugin.subject}': ${refused.message}`);
  }
}

async function listen() {
  nc = (await connecting) ?? (await connect(connectOptions(`plugin:${plugin.pluginId}`)));
  void watch(nc);
  await subscribeOn(nc);
}

// New credentials (a renewal before the current ones expire): a second connection with them takes the
// plugin's requests in the same queue group before the first one drains, so no request finds no one.
async function renew() {
  if (nc === undefined) return;
  const next = await connect(connectOptions(`plugin:${plugin.pluginId}`));
  void watch(next);
  await subscribeOn(next);
  const previous = nc;
  nc = next;
  await previous.drain().catch(() => undefined);
}

async function stop() {
  // Stop taking requests and finish those in flight, then let the plugin clean up.
  await nc?.drain().catch(() => undefined);
  if (typeof entry?.deactivate === "function") await entry.deactivate();
}

port.on("message", (message) => {
  switch (message.type) {
    case "nats-auth":
      if (plugin === undefined) {
        // A spare's shared credentials, before it connects.
        if (auth !== null || natsAuth !== "shared") break;
        setAuth(message.auth);
        beginConnecting();
      } else if (natsAuth === "per-plugin") {
        setAuth(message.auth);
        renew().catch((error) =>
          log("warn", "could not connect with renewed NATS credentials", describe(error)),
        );
      }
      break;
    case "load":
      if (plugin !== undefined) break;
      plugin = message.plugin;
      if (natsAuth === "per-plugin") {
        setAuth(message.auth);
        inbox = message.inboxPrefix ?? inbox;
        // The plugin's own connection is made while its module loads and activates.
        if (plugin.subject) beginConnecting(`plugin:${plugin.pluginId}`);
      }
      start().catch((error) => port.postMessage({ type: "failed", error: describeLoad(error) }));
      break;
    case "ping":
      port.postMessage({ type: "pong", id: message.id });
      break;
    case "published": {
      const waiting = publishing.get(message.id);
      publishing.delete(message.id);
      if (message.error) waiting?.reject(new Error(message.error));
      else waiting?.resolve();
      break;
    }
    case "stop":
      if (plugin === undefined) {
        void connecting?.then((c) => c?.close());
        port.postMessage({ type: "stopped" });
        break;
      }
      stop()
        .catch((error) => log("warn", "deactivate failed", describe(error)))
        .finally(() => port.postMessage({ type: "stopped" }));
      break;
  }
});

port.postMessage({ type: "idle" });
