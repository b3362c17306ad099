/**
 * The bus on a real NATS server: typed request/reply, errors crossing the wire as the same
 * SvcError, queue groups sharing load between replicas, the deadline travelling with the request, drain
 * finishing in-flight work, and idempotent provisioning of the events stream.
 */
import { AckPolicy, type ConsumerConfig, type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  Bus,
  connectNats,
  ensureDurable,
  ensureEventsStream,
  eventsSubject,
  isMissingConsumer,
} from "@svc/bus";
import {
  messageClient,
  onBroadcast,
  pingMessages,
  publishBroadcast,
  resolverBroadcasts,
  type ResolveRequest,
  type ResolveResult,
  resolverMessages,
  serveMessage,
} from "@svc/contracts";
import { createDb, sql } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError } from "@svc/errors";
import { createLogger } from "@svc/observability";
import { afterAll, afterEach, describe, expect, it } from "vitest";

import { createHarness } from "./support/harness.js";
import { until } from "./support/wait.js";

const h = await createHarness({ seed: false });
const log = createLogger("bus-test", "silent");
const connections: NatsConnection[] = [];
/** The buses made by the running test: closed after it, so a test that fails half-way leaves no handler behind to answer the next test's requests. */
let testBuses: Bus[] = [];

/** A connection to the file's bus, closed after the file. */
async function connection(name: string, coalesceWrites?: boolean): Promise<NatsConnection> {
  const nc = await connectNats({
    url: h.env.NATS_URL as string,
    auth: h.natsAuth,
    name,
    logger: log,
    ...(coalesceWrites === undefined ? {} : { coalesceWrites }),
  });
  connections.push(nc);
  return nc;
}

async function newBus(service: string, defaultTimeoutMs = 2_000): Promise<Bus> {
  const nc = await connection(service);
  const bus = new Bus({
    nc,
    prefix: h.env.SVC_SUBJECT_PREFIX as string,
    service,
    logger: log,
    defaultTimeoutMs,
  });
  testBuses.push(bus);
  return bus;
}

afterEach(async () => {
  const open = testBuses.filter((bus) => !bus.nc.isClosed());
  testBuses = [];
  await Promise.all(open.map((bus) => bus.nc.close()));
});

const resolve = resolverMessages["workspace.resolve"];
const ask = (bus: Bus, request: ResolveRequest, options?: { timeoutMs?: number }) =>
  messageClient(bus, resolverMessages).request("workspace.resolve", request, options);

afterAll(async () => {
  await Promise.all(connections.filter((nc) => !nc.isClosed()).map((nc) => nc.close()));
});

describe("a request past its deadline changes nothing", () => {
  it("rolls back a transaction that would commit after the caller's deadline (the caller saw 504)", async () => {
    const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 2, applicationName: "deadline-test" });
    await db.query(sql`CREATE TABLE IF NOT EXISTS public.deadline_writes (n int)`);
    const server = await newBus("resolver");
    let outcome: unknown;
    let inserted = false;
    let release = () => {};
    const slowWork = new Promise<void>((r) => (release = r));
    serveMessage(server, resolve, async () => {
      try {
        await db.transaction(async (tx) => {
          await tx.query(sql`INSERT INTO public.deadline_writes VALUES (1)`);
          inserted = true;
          // Slow work (a password hash under load, a queue of requests) outlasts the caller's patience:
          // it ends only once the caller has given up.
          await slowWork;
        });
        outcome = "committed";
      } catch (error) {
        outcome = error;
      }
      return { resolved: false, workspaceKey: null };
    });
    // The deadline leaves room for the request to reach the handler on a loaded machine (a request that
    // arrives past its deadline is skipped, not run).
    const client = await newBus("gateway", 1_500);
    await server.nc.flush();
    const answer = await ask(client, { host: "a", path: "/" }).catch((e) => e);
    expect(answer).toMatchObject({ code: ErrorCode.Timeout });
    expect(inserted).toBe(true);
    release();
    await until(async () => outcome !== undefined);
    expect(outcome).toMatchObject({ code: ErrorCode.Timeout });
    expect((await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM public.deadline_writes`)).n).toBe(
      0,
    );
    await server.drain();
    await db.end();
  });
});

describe("request/reply", () => {
  it("answers a typed request", async () => {
    const server = await newBus("resolver");
    serveMessage(server, resolve, (req) => ({
      resolved: req.host === "a",
      workspaceKey: req.path,
    }));
    const client = await newBus("gateway");
    await server.nc.flush();
    expect(await ask(client, { host: "a", path: "/x" })).toEqual({
      resolved: true,
      workspaceKey: "/x",
    });
    await server.drain();
  });

  it("carries an SvcError across the wire with its code, detail and extensions", async () => {
    const server = await newBus("resolver");
    serveMessage(server, resolve, (req) => {
      if (req.host === "missing") throw new NotFoundError("No such workspace.");
      throw new ValidationError([{ field: "/host", message: "is odd" }]);
    });
    const client = await newBus("gateway");
    await server.nc.flush();
    const notFound = await ask(client, { host: "missing", path: "/" }).catch((e) => e);
    expect(notFound).toBeInstanceOf(SvcError);
    expect(notFound).toMatchObject({ code: ErrorCode.NotFound, message: "No such workspace.", status: 404 });
    const invalid = await ask(client, { host: "x", path: "/" }).catch((e) => e);
    expect(invalid).toMatchObject({ code: ErrorCode.ValidationFailed, status: 400 });
    expect(invalid.extensions).toEqual({ errors: [{ field: "/host", message: "is odd" }] });
    await server.drain();
  });

  it("turns an unexpected handler failure into a generic internal error without its message", async () => {
    const server = await newBus("resolver");
    serveMessage(server, resolve, () => {
      throw new Error("password=hunter2 leaked in a message");
    });
    const client = await newBus("gateway");
    await server.nc.flush();
    const error = await ask(client, { host: "x", path: "/" }).catch((e) => e);
    expect(error).toMatchObject({ code: ErrorCode.Internal, status: 500 });
    expect(String(error.message)).not.toContain("hunter2");
    await server.drain();
  });

  it("rejects a payload that fails the handler's decoder with a validation error", async () => {
    const server = await newBus("resolver");
    let handled = 0;
    serveMessage(server, resolve, () => {
      handled++;
      return { resolved: false, workspaceKey: null };
    });
    const client = await newBus("gateway");
    await server.nc.flush();
    // Any NATS client may send anything: the contract's schema answers before the handler runs.
    const error = await client
      .request(resolve.subject, { host: 42, path: "x".repeat(3_000) })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: ErrorCode.ValidationFailed });
    expect((error as SvcError).extensions.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "/host" }),
        expect.objectContaining({ field: "/path" }),
      ]),
    );
    expect(handled).toBe(0);
    await server.drain();
  });

  it("refuses a reply that breaks its contract (development and tests): a 500, not a wrong answer", async () => {
    const server = await newBus("resolver");
    // A handler typed around its contract, e.g. by a cast from untyped data.
    serveMessage(server, resolve, () => JSON.parse('{"resolved":"yes"}') as ResolveResult);
    const client = await newBus("gateway");
    await server.nc.flush();
    const error = await ask(client, { host: "x", path: "/" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: ErrorCode.Internal, status: 500 });
    await server.drain();
  });

  it("answers 503 at once when nobody serves the subject", async () => {
    const client = await newBus("gateway");
    const started = Date.now();
    const error = await messageClient(client, pingMessages("rbac"))
      .request("ping", {})
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: ErrorCode.ServiceUnavailable, extensions: { service: "rbac" } });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("shares requests between replicas of one queue group", async () => {
    const counts = [0, 0];
    const replicas = [await newBus("resolver"), await newBus("resolver")];
    replicas.forEach((bus, i) => {
      serveMessage(bus, resolve, () => {
        counts[i] = (counts[i] ?? 0) + 1;
        return { resolved: false, workspaceKey: null };
      });
    });
    await Promise.all(replicas.map((r) => r.nc.flush()));
    const client = await newBus("gateway");
    await Promise.all(Array.from({ length: 200 }, () => ask(client, { host: "h", path: "/" })));
    expect((counts[0] ?? 0) + (counts[1] ?? 0)).toBe(200);
    // Each replica took a real share (NATS picks at random; 200 requests make a lopsided split implausible).
    expect(Math.min(...counts)).toBeGreaterThan(40);
    await Promise.all(replicas.map((r) => r.drain()));
  });

  it("passes the caller's deadline to the handler", async () => {
    const server = await newBus("resolver");
    let seenDeadline = 0;
    serveMessage(server, resolve, (_req, ctx) => {
      seenDeadline = ctx.deadline;
      return { resolved: false, workspaceKey: null };
    });
    const client = await newBus("gateway");
    await server.nc.flush();
    const before = Date.now();
    await ask(client, { host: "h", path: "/" }, { timeoutMs: 1_234 });
    expect(seenDeadline).toBeGreaterThanOrEqual(before + 1_234);
    expect(seenDeadline).toBeLessThanOrEqual(Date.now() + 1_234);
    await server.drain();
  });

  it("finishes a handler that is running when the service drains", async () => {
    const server = await newBus("resolver");
    let release: () => void = () => undefined;
    const started = new Promise<void>((resolveStarted) => {
      serveMessage(server, resolve, async () => {
        resolveStarted();
        await new Promise<void>((r) => {
          release = r;
        });
        return { resolved: true, workspaceKey: "late" };
      });
    });
    const client = await newBus("gateway");
    await server.nc.flush();
    const reply = ask(client, { host: "h", path: "/" });
    await started;
    const drained = server.drain();
    setTimeout(() => release(), 200);
    expect(await reply).toEqual({ resolved: true, workspaceKey: "late" });
    await drained;
    expect(server.nc.isClosed()).toBe(true);
  });
});

describe("the NATS service protocol", () => {
  const prefix = h.env.SVC_SUBJECT_PREFIX as string;
  /** Every replica's answer to a discovery request, this run's only (other runs share the server). */
  async function discover<T>(nc: NatsConnection, subject: string): Promise<T[]> {
    const out: T[] = [];
    for await (const m of await nc.requestMany(subject, "", {
      strategy: "stall",
      maxWait: 2_000,
      stall: 300,
    })) {
      const answer = m.json<T & { metadata?: Record<string, string> }>();
      if (answer.metadata?.subject_prefix === prefix) out.push(answer);
    }
    return out;
  }

  it("lists each replica with its endpoints, request and error counts, as `nats micro` reads them", async () => {
    const nc = await connection("micro-test");
    const replicas: Bus[] = [];
    for (const n of [0, 1]) {
      const own = await connection(`micro-${n}`);
      replicas.push(
        new Bus({
          nc: own,
          prefix,
          service: "resolver",
          logger: log,
          defaultTimeoutMs: 2_000,
          micro: { version: "1.2.3" },
        }),
      );
    }
    testBuses.push(...replicas);
    for (const bus of replicas) {
      serveMessage(bus, resolve, ({ host }) => {
        if (host === "bad") throw new ValidationError([{ field: "/host", message: "is bad" }]);
        return { resolved: false, workspaceKey: null };
      });
    }
    // Both replicas' subscriptions reach the server before anyone asks.
    await Promise.all(replicas.map((bus) => bus.nc.flush()));
    const client = await newBus("gateway");
    await ask(client, { host: "a", path: "/" });
    const failed = await nc.request(
      `${prefix}.resolver.workspace.resolve`,
      JSON.stringify({ host: "bad", path: "/" }),
    );
    expect(failed.headers?.get("Nats-Service-Error-Code")).toBe("400");
    expect(failed.headers?.get("Nats-Service-Error")).toContain("/host");
    expect(failed.headers?.get("Svc-Error-Code")).toBe(ErrorCode.ValidationFailed);

    const pings = await discover<{ type: string; name: string; id: string; version: string }>(
      nc,
      "$SRV.PING",
    );
    expect(pings.map((p) => [p.type, p.name, p.version])).toEqual([
      ["io.nats.micro.v1.ping_response", "resolver", "1.2.3"],
      ["io.nats.micro.v1.ping_response", "resolver", "1.2.3"],
    ]);
    expect(new Set(pings.map((p) => p.id)).size).toBe(2);

    const [info] = await discover<{
      endpoints: Array<{ name: string; subject: string; queue_group: string }>;
    }>(nc, `$SRV.INFO.resolver.${pings[0]?.id}`);
    expect(info?.endpoints).toEqual([
      {
        name: "workspace_resolve",
        subject: `${prefix}.resolver.workspace.resolve`,
        queue_group: "resolver",
        metadata: null,
      },
    ]);

    const stats = await discover<{
      type: string;
      started: string;
      endpoints: Array<{
        num_requests: number;
        num_errors: number;
        last_error: string;
        processing_time: number;
      }>;
    }>(nc, "$SRV.STATS.resolver");
    expect(stats).toHaveLength(2);
    expect(stats[0]?.type).toBe("io.nats.micro.v1.stats_response");
    const totals = stats.flatMap((s) => s.endpoints);
    expect(totals.reduce((n, e) => n + e.num_requests, 0)).toBe(2);
    expect(totals.reduce((n, e) => n + e.num_errors, 0)).toBe(1);
    expect(totals.map((e) => e.last_error).join("")).toContain("400");
    expect(totals.every((e) => e.num_requests === 0 || e.processing_time > 0)).toBe(true);

    // A drained replica leaves the list.
    await replicas[0]?.drain();
    expect(await discover(nc, "$SRV.PING.resolver")).toHaveLength(1);
  });
});

describe("broadcasts", () => {
  it("reach every subscriber, not one of a group", async () => {
    const a = await newBus("gateway");
    const b = await newBus("gateway");
    const seen: string[] = [];
    const invalidate = resolverBroadcasts["cache.invalidate"];
    onBroadcast(a, invalidate, (p) => {
      seen.push(`a:${p.reason}`);
    });
    onBroadcast(b, invalidate, (p) => {
      seen.push(`b:${p.reason}`);
    });
    await Promise.all([a.nc.flush(), b.nc.flush()]);
    const sender = await newBus("resolver");
    // One that breaks the broadcast's schema is dropped by every receiver; the one after it arrives.
    sender.broadcast(invalidate.subject, { reason: 42 });
    publishBroadcast(sender, invalidate, { reason: "test" });
    await sender.nc.flush();
    await until(async () => seen.length >= 2);
    expect(seen.sort()).toEqual(["a:test", "b:test"]);
  });
});

describe("events stream", () => {
  it("is provisioned idempotently, even by concurrent starters", async () => {
    const nc = (await newBus("provisioner")).nc;
    const name = `${h.env.SVC_EVENTS_STREAM}_IDEM`;
    const prefix = `${h.env.SVC_SUBJECT_PREFIX}idem`;
    await Promise.all([1, 2, 3].map(() => ensureEventsStream(nc, { name, prefix, replicas: 1 })));
    await ensureEventsStream(nc, { name, prefix, replicas: 1 });
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(name);
    expect(info.config.subjects).toEqual([eventsSubject(prefix)]);
    expect(info.config.duplicate_window).toBe(120_000 * 1_000_000);
    // An event published on the subject lands in the stream, and a repeated Nats-Msg-Id is dropped.
    const js = jsm.jetstream();
    const first = await js.publish(eventsSubject(prefix, "user.created"), "{}", { msgID: "evt-1" });
    const again = await js.publish(eventsSubject(prefix, "user.created"), "{}", { msgID: "evt-1" });
    expect(again.duplicate).toBe(true);
    expect(again.seq).toBe(first.seq);
    await jsm.streams.delete(name);
  });
});

describe("durable consumers", () => {
  it("are made only when missing, and a failure to ask is no reason to make one", async () => {
    const nc = (await newBus("provisioner")).nc;
    const name = `${h.env.SVC_EVENTS_STREAM}_DURABLE`;
    const prefix = `${h.env.SVC_SUBJECT_PREFIX}durable`;
    await ensureEventsStream(nc, { name, prefix, replicas: 1 });
    const jsm = await jetstreamManager(nc);
    const config = {
      durable_name: "d1",
      ack_policy: AckPolicy.Explicit,
      filter_subject: eventsSubject(prefix),
    };

    expect((await ensureDurable(jsm, name, config)).missing).toBe(true);
    expect((await ensureDurable(jsm, name, config)).missing).toBe(false);
    // The server lost it (a restart without its store): made again.
    await jsm.consumers.delete(name, "d1");
    expect((await ensureDurable(jsm, name, config)).missing).toBe(true);

    // The consumer's info cannot be had (a cluster electing a leader, a request timing out): the call
    // fails, and makes nothing, rather than taking the consumer for lost.
    await jsm.consumers.delete(name, "d1");
    const unanswered = new Error("TimeoutError: timeout");
    const asking = {
      consumers: {
        info: () => Promise.reject(unanswered),
        add: (stream: string, c: Partial<ConsumerConfig>) => jsm.consumers.add(stream, c),
      },
    } as unknown as JetStreamManager;
    await expect(ensureDurable(asking, name, config)).rejects.toBe(unanswered);
    await expect(jsm.consumers.info(name, "d1")).rejects.toSatisfy(isMissingConsumer);

    // Missing when asked, and made by another replica before this one could: still missing, so the
    // caller binds anew to the consumer made again.
    const notFound = await jsm.consumers.info(name, "d1").catch((e: Error) => e);
    if (!(notFound instanceof Error)) throw new Error("the consumer was not deleted");
    await jsm.consumers.add(name, config);
    const raced = {
      consumers: {
        info: (() => {
          let asked = 0;
          return (stream: string, durable: string) =>
            asked++ === 0 ? Promise.reject(notFound) : jsm.consumers.info(stream, durable);
        })(),
        add: () => Promise.reject(new Error("consumer already exists")),
      },
    } as unknown as JetStreamManager;
    expect((await ensureDurable(raced, name, config)).missing).toBe(true);
    await jsm.streams.delete(name);
  });
});

describe("writes to NATS", () => {
  /** A connection whose transport's writes are counted (nats.js's transport, reached past its types). */
  async function counted(coalesceWrites: boolean) {
    const nc = await connection(`writes-${coalesceWrites}`, coalesceWrites);
    const transport = (nc as unknown as { protocol: { transport: { send(frame: Uint8Array): void } } })
      .protocol.transport;
    const sent = { writes: 0 };
    const send = transport.send.bind(transport);
    transport.send = (frame) => {
      sent.writes++;
      send(frame);
    };
    return { nc, sent };
  }

  it("go out at once for a turn's first message and together for the rest of the turn, every message delivered in order, and what a close finds queued is sent", async () => {
    const subject = `${h.env.SVC_SUBJECT_PREFIX}.writes.test`;
    const reader = await connection("reader");
    const received: string[] = [];
    const sub = reader.subscribe(subject);
    void (async () => {
      for await (const m of sub) received.push(m.string());
    })();
    await reader.flush();
    // Ten publishes, each from its own callback of one turn (as the gateway handles ten HTTP requests).
    const publishTen = (nc: NatsConnection, tag: string) =>
      new Promise<void>((resolve) => {
        for (let n = 0; n < 10; n++)
          setImmediate(() => {
            nc.publish(subject, `${tag}${n}`);
            if (n === 9) resolve();
          });
      });
    const plain = await counted(false);
    const coalesced = await counted(true);
    await Promise.all([plain.nc.flush(), coalesced.nc.flush()]);
    for (const c of [plain, coalesced]) c.sent.writes = 0;

    await publishTen(plain.nc, "p");
    await publishTen(coalesced.nc, "c");
    await Promise.all([plain.nc.flush(), coalesced.nc.flush()]);
    expect(plain.sent.writes).toBe(11); // ten publishes and flush()'s PING
    // The first at once, the other nine and the PING queued in the same turn at its end.
    expect(coalesced.sent.writes).toBe(2);
    await until(async () => received.length === 20, 5_000);
    expect(received.filter((m) => m.startsWith("c"))).toEqual([...Array(10).keys()].map((n) => `c${n}`));

    // One message alone in its turn goes out at once (at low load a request waits for nothing): written
    // when nats.js's own microtask runs, before anything the turn has left.
    await new Promise((r) => setImmediate(r));
    coalesced.sent.writes = 0;
    coalesced.nc.publish(subject, "alone");
    await Promise.resolve();
    expect(coalesced.sent.writes).toBe(1);
    await until(async () => received.includes("alone"), 5_000);

    // Published and closed in the same turn: the close writes it before it ends the connection.
    coalesced.nc.publish(subject, "last words");
    await coalesced.nc.close();
    await until(async () => received.includes("last words"), 5_000);
    // A request and its reply still cross (each side coalescing).
    const server = (await counted(true)).nc;
    server.subscribe(`${subject}.echo`, { callback: (_e, m) => void m.respond(m.data) });
    await server.flush();
    const client = (await counted(true)).nc;
    expect((await client.request(`${subject}.echo`, "ping", { timeout: 2_000 })).string()).toBe("ping");
  });
});
