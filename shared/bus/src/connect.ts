import { readFileSync } from "node:fs";

import {
  type Authenticator,
  connect,
  type ConnectionOptions,
  type NatsConnection,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
} from "@nats-io/transport-node";
import type { Logger } from "@svc/observability";

import { nativeFromSeed, type NativeKeyPair } from "./native-nkeys.js";

/**
 * How a process authenticates to NATS and whether over TLS: at most one of a
 * credentials file (a user JWT and its nkey seed), an nkey seed file, a token, or a user and password;
 * TLS with a CA, a client certificate and key, and the server name to expect. Files are read at every
 * (re)connect, so rotated credentials apply without a restart.
 */
export interface NatsAuth {
  readonly credsFile?: string | null;
  readonly nkeySeedFile?: string | null;
  readonly token?: string | null;
  readonly user?: string | null;
  readonly password?: string | null;
  readonly tls?: {
    readonly caFile?: string | null;
    readonly certFile?: string | null;
    readonly keyFile?: string | null;
    readonly serverName?: string | null;
  } | null;
}

/** The nats.js options that carry `auth`: an authenticator and TLS settings. */
export function natsAuthOptions(auth: NatsAuth | undefined): Partial<ConnectionOptions> {
  if (auth === undefined) return {};
  let authenticator: Authenticator | undefined;
  const { credsFile, nkeySeedFile, token, user, password } = auth;
  if (credsFile) {
    authenticator = (nonce) => {
      const { jwt, seed } = parseCreds(readFileSync(credsFile, "utf8"));
      return { jwt, ...signedNonce(seed, nonce) };
    };
  } else if (nkeySeedFile) {
    authenticator = (nonce) => signedNonce(readFileSync(nkeySeedFile, "utf8").trim(), nonce);
  } else if (token) authenticator = tokenAuthenticator(token);
  else if (user) authenticator = usernamePasswordAuthenticator(user, password ?? "");
  const t = auth.tls;
  const tls = t && (t.caFile || t.certFile || t.keyFile || t.serverName) ? tlsOptions(t) : undefined;
  return { ...(authenticator ? { authenticator } : {}), ...(tls ? { tls } : {}) };
}

/** Credentials this process cannot even present (a file that is not a `.creds` file, a broken seed). */
class NatsCredentialsError extends Error {
  override readonly name = "NatsCredentialsError";
}

/**
 * The user JWT and nkey seed of a `.creds` file: two armoured blocks, the JWT first (the format nats.js
 * and the `nsc` tool read and write).
 */
export function parseCreds(text: string): { jwt: string; seed: string } {
  const blocks = [...text.matchAll(/-{3,}[^\n]*-{3,}\n\s*(\S+)\s*\n\s*-{3,}[^\n]*-{3,}/g)].map((m) => m[1]);
  const [jwt, seed] = blocks;
  if (jwt === undefined || seed === undefined)
    throw new NatsCredentialsError("unable to parse the NATS credentials file");
  return { jwt, seed };
}

/**
 * The nkey's public key and its signature of the server's nonce (none without a nonce), signed by Node's
 * Ed25519: nats.js's own authenticators sign with a JavaScript Ed25519 whose garbage (thousands of typed
 * arrays per signature) left every process that connected with credentials about 6 MB larger for good.
 */
function signedNonce(seed: string, nonce: string | undefined): { nkey: string; sig: string } {
  let key: NativeKeyPair;
  try {
    key = nativeFromSeed(seed);
  } catch {
    // A message of our own: nothing of the seed goes into a log.
    throw new NatsCredentialsError("the NATS nkey seed is not a valid seed");
  }
  try {
    const sig = nonce ? Buffer.from(key.sign(new TextEncoder().encode(nonce))).toString("base64") : "";
    return { nkey: key.getPublicKey(), sig };
  } finally {
    key.clear();
  }
}

/**
 * nats.js's TLS options whose `ca`, `cert` and `key` read their files each time the transport reads them
 * (at every connect and reconnect), synchronously. Given the file names instead, the transport reads them
 * asynchronously, on libuv's thread pool: its four threads then start in a process that may never use them
 * otherwise (a service with a NATS URL by IP address, whose name needs no lookup), about 0.7 MB more
 * resident memory for good.
 */
function tlsOptions(t: NonNullable<NatsAuth["tls"]>): NonNullable<ConnectionOptions["tls"]> {
  const options: Record<string, unknown> = {};
  const readEachTime = (name: "ca" | "cert" | "key", file: string | null | undefined) => {
    if (file)
      Object.defineProperty(options, name, { enumerable: true, get: () => readFileSync(file, "utf8") });
  };
  readEachTime("ca", t.caFile);
  readEachTime("cert", t.certFile);
  readEachTime("key", t.keyFile);
  // Passed on to Node's tls.connect by the transport.
  if (t.serverName) options.servername = t.serverName;
  return options;
}

/**
 * Whether an error means NATS refused this process's credentials or its TLS: retrying cannot mend it, so
 * the process stops with a clear message (status 78) instead of trying for ever.
 */
export function isNatsAuthError(error: unknown): boolean {
  if (error instanceof NatsCredentialsError) return true;
  const text = `${(error as { name?: string })?.name ?? ""} ${(error as Error)?.message ?? ""} ${
    (error as { code?: string })?.code ?? ""
  }`;
  return /authori[sz]ation|authentication|permissions? violation|user authentication|TLS|certificate|self[- ]signed|ERR_TLS|CERT_|UNABLE_TO_VERIFY/i.test(
    text,
  );
}

export interface ConnectOptions {
  readonly url: string;
  /** Connection name shown by the NATS server's monitoring (`<service>@<host>`). */
  readonly name: string;
  readonly logger: Logger;
  /** Credentials and TLS (none: an open server). */
  readonly auth?: NatsAuth;
  /** Where replies to this connection's requests arrive (default `_INBOX`). */
  readonly inboxPrefix?: string;
  /** A turn's first message written at once, the rest of the turn in one write (`coalesceWrites`); default true. */
  readonly coalesceWrites?: boolean;
}

/** Whether each connection is up, as its status events last said (a request sent while down would wait). */
const connected = new WeakMap<NatsConnection, boolean>();

/**
 * Follows a connection's disconnects and reconnects, so that callers can fail fast while it is down
 * instead of waiting for a buffered request to time out. Idempotent.
 */
export function trackConnection(nc: NatsConnection): void {
  if (connected.has(nc)) return;
  connected.set(nc, !nc.isClosed());
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") connected.set(nc, false);
      else if (status.type === "reconnect") connected.set(nc, true);
    }
  })().catch(() => undefined);
}

/** False while the connection is down (between a disconnect and the reconnect) or closed. */
export function isNatsConnected(nc: NatsConnection): boolean {
  return !nc.isClosed() && (connected.get(nc) ?? true);
}

/**
 * Connects to NATS and keeps reconnecting for ever: a service outlives a NATS restart, and /ready tells
 * the orchestrator while it is cut off.
 */
export async function connectNats(options: ConnectOptions): Promise<NatsConnection> {
  const nc = await connect({
    servers: options.url.split(",").map((s) => s.trim()),
    name: options.name,
    ...natsAuthOptions(options.auth),
    ...(options.inboxPrefix === undefined ? {} : { inboxPrefix: options.inboxPrefix }),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: false,
    timeout: 5_000,
    // Without it the client makes two Error objects (stack traces and all) for every request it sends,
    // to say where a timed-out request began: about a tenth of the gateway's CPU on an operator GET. Our
    // own errors name the subject instead.
    noAsyncTraces: true,
  });
  if ((options.coalesceWrites ?? true) && !coalesceWrites(nc))
    options.logger.warn("this nats.js cannot coalesce writes: one write per message");
  trackConnection(nc);
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect" || status.type === "reconnect" || status.type === "error") {
        options.logger.warn({ nats: status.type }, "nats connection status changed");
      }
    }
  })().catch(() => undefined);
  return nc;
}

/** The part of nats.js's protocol handler `coalesceWrites` changes (not in its public types). */
interface ProtocolWrites {
  flushPending(): void;
  close(err?: Error): Promise<void>;
  readonly outbound: { size(): number };
  readonly pendingLimit: number;
}

function hasProtocolWrites(value: unknown): value is ProtocolWrites {
  const p = value as Partial<ProtocolWrites> | null | undefined;
  return (
    typeof p?.flushPending === "function" &&
    typeof p.close === "function" &&
    typeof p.outbound?.size === "function" &&
    typeof p.pendingLimit === "number"
  );
}

/**
 * nats.js writes what was queued in one microtask to the socket at its end: under load every HTTP request
 * the gateway reads becomes a NATS write of its own, one system call each. Here the first write of a turn
 * of the event loop goes out at once, as in nats.js (a request at low load waits for nothing), and what
 * the later callbacks of the same turn queue goes out in one write at its end (`setImmediate`): the
 * gateway's operator GET under load made 1.2 write calls per request instead of 2.0, its answer
 * included. As before, a queue past nats.js's pending limit is written at once, and a close writes what
 * is queued first. False, and nothing changed, when this nats.js is not shaped as expected.
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol: unknown = Reflect.get(nc, "protocol");
  if (!hasProtocolWrites(protocol)) return false;
  const flushNow = protocol.flushPending.bind(protocol);
  const close = protocol.close.bind(protocol);
  // A write went out in this turn: what is queued after it waits for the turn's end.
  let turnWritten = false;
  const endTurn = () => {
    turnWritten = false;
    flushNow();
  };
  protocol.flushPending = () => {
    if (protocol.outbound.size() >= protocol.pendingLimit) return flushNow();
    if (turnWritten) return;
    turnWritten = true;
    setImmediate(endTurn);
    flushNow();
  };
  protocol.close = (err) => {
    flushNow();
    return close(err);
  };
  return true;
}

/** True when a round trip to the NATS server completes within the timeout. */
export async function natsIsReachable(nc: NatsConnection, timeoutMs: number): Promise<boolean> {
  if (nc.isClosed()) return false;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      nc.rtt().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
