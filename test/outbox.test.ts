/**
 * Events are recorded in the transaction of the change they describe and relayed to
 * JetStream afterwards. A NATS outage delays them and loses none; an event recorded by a process that died
 * before publishing is relayed by the next one; a rolled-back change publishes nothing; several relays at
 * once publish each event once. A relay waiting on JetStream holds no transaction open, and
 * its connections terminated meanwhile (`pg_terminate_backend`) fail the pass, not the process.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connectNats, ensureEventsStream, eventsSubject } from "@svc/bus";
import { createDb, sql } from "@svc/db";
import { createLogger, startTracing, stopTracing } from "@svc/observability";
import { Outbox } from "@svc/outbox";
import { gatewayService } from "@svc/service-gateway";
import { rbacService } from "@svc/service-rbac";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";

import { createHarness } from "./support/harness.js";
import { bearerApi } from "./support/http.js";
import { OwnNatsServer } from "./support/nats-server.js";
import { mintToken } from "./support/tokens.js";
import { until } from "./support/wait.js";

const h = await createHarness();
const nats = new OwnNatsServer();
await nats.start();
const log = createLogger("outbox-test", "silent");
const db = createDb({ databaseUrl: h.db.url, maximumPoolSize: 4, applicationName: "outbox-test" });
const prefix = h.env.SVC_SUBJECT_PREFIX as string;
const stream = h.env.SVC_EVENTS_STREAM as string;
const nc = await connectNats({ url: nats.url, name: "outbox-test", logger: log });
const outboxes: Outbox[] = [];
afterAll(async () => {
  await Promise.all(outboxes.map((o) => o.stop()));
  await h.stopAll();
  await nc.close();
  await db.end();
  await nats.dispose();
});

function newOutbox() {
  const outbox = new Outbox({
    db,
    schema: "rbac",
    nc,
    subjectPrefix: prefix,
    databaseUrl: h.db.url,
    log,
    pollIntervalMs: 200,
    batchSize: 7,
  });
  outboxes.push(outbox);
  return outbox;
}

/** The event ids the stream holds for `name`, in order. */
async function streamed(name: string): Promise<string[]> {
  await ensureEventsStream(nc, { name: stream, prefix, replicas: 1 });
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(stream);
  const ids: string[] = [];
  const js = jetstream(nc);
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await js.streams
      .get(stream)
      .then((s) => s.getMessage({ seq }))
      .catch(() => null);
    if (m?.subject === eventsSubject(prefix, name)) ids.push(m.header.get("Nats-Msg-Id"));
  }
  return ids;
}

describe("the transactional outbox", () => {
  it("records with the change, relays after a NATS outage, and publishes each event once across relays", async () => {
    await ensureEventsStream(nc, { name: stream, prefix, replicas: 1 });
    const a = newOutbox();
    const b = newOutbox();
    // Only the next tests' relays run on rbac's outbox from here on, whether this test passes or fails.
    onTestFinished(async () => {
      await a.stop();
      await b.stop();
    });
    await a.start();
    await b.start();
    await nats.kill();
    // While NATS is down: 40 changes commit, each with its event; one transaction rolls back.
    const recorded: string[] = [];
    for (let i = 0; i < 40; i++) {
      recorded.push(
        (await db.transaction((tx) => (i % 2 === 0 ? a : b).record(tx, "outbox.tested", null, { i })))
          .eventId,
      );
    }
    await db
      .transaction(async (tx) => {
        await a.record(tx, "outbox.tested", null, { rolledBack: true });
        throw new Error("rolled back");
      })
      .catch(() => undefined);
    expect(await a.pending()).toBe(40);
    // Back with an empty store: the stream is made again (a service's provisioner does it in production).
    await nats.start();
    await until(
      () =>
        ensureEventsStream(nc, { name: stream, prefix, replicas: 1 }).then(
          () => true,
          () => false,
        ),
      15_000,
    );
    await until(async () => (await a.pending()) === 0, 20_000);
    const ids = await streamed("outbox.tested");
    expect(ids.sort()).toEqual([...recorded].sort());
    // A relay counts its pass once the rows' DELETE has answered, just after another connection sees none.
    await until(async () => a.relayed + b.relayed >= 40);
    expect(a.relayed + b.relayed).toBe(40);
  }, 60_000);

  it("an event recorded by a process that died before publishing is relayed by the next start of rbac, in its trace", async () => {
    // Tracing on in this process (spans made, none exported): the relay publishes in the stored trace.
    await startTracing({ service: "outbox-test", version: "0", instance: "test" }, {}, []);
    onTestFinished(() => stopTracing());
    // The next test's relay is the only one on rbac's outbox, whether this test passes or fails.
    onTestFinished(() => h.stopAll());
    // As if rbac had committed a user and its event, inside a trace, and died before the relay ran.
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await db.query(sql`
      INSERT INTO rbac.outbox (event_id, event_name, workspace_key, payload, trace_context)
      VALUES ('00000000-0000-4000-8000-00000000c0de', 'user.created', NULL, '{"userId":"crashed"}',
              ${`00-${traceId}-b7ad6b7169203331-01`})`);
    await h.start(rbacService, { NATS_URL: nats.url });
    await until(
      async () => (await streamed("user.created")).includes("00000000-0000-4000-8000-00000000c0de"),
      15_000,
    );
    // The streamed event carries the trace of the change that made it, from the row the crash left.
    const relayed = await (
      await jetstream(nc).streams.get(stream)
    ).getMessage({
      last_by_subj: eventsSubject(prefix, "user.created"),
    });
    expect(relayed?.header.get("traceparent")).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    // And a change made through the API is streamed with its event.
    const base = (await h.start(gatewayService, { NATS_URL: nats.url })).hooks.httpAddress as string;
    const operator = await mintToken({ scope: "platform", roles: ["superadmin"] });
    const created = await bearerApi(() => base)("POST", "/api/users", operator, {
      userName: "outboxed",
      password: "long-enough-password",
    });
    expect(created.status).toBe(201);
    await until(async () => (await streamed("user.created")).length === 2, 15_000);
    // The relay deletes a row once JetStream has acknowledged its event: just after the stream shows it.
    await until(
      async () => (await db.one<{ n: number }>(sql`SELECT count(*)::int AS n FROM rbac.outbox`)).n === 0,
    );
  }, 60_000);

  it("holds no transaction while it waits for JetStream; terminated connections fail the pass, not the process", async () => {
    await ensureEventsStream(nc, { name: stream, prefix, replicas: 1 });
    const relayDb = createDb({
      databaseUrl: h.db.url,
      maximumPoolSize: 2,
      applicationName: "outbox-relay-22",
    });
    try {
      const relay = new Outbox({
        db: relayDb,
        schema: "rbac",
        nc,
        subjectPrefix: prefix,
        databaseUrl: h.db.url,
        log,
      });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++)
        ids.push((await db.transaction((tx) => relay.record(tx, "outbox.held", null, { i }))).eventId);
      // A hung NATS: the relay's publish waits for an acknowledgement that does not come.
      nats.pause();
      const pass = relay.relayOnce().then(
        () => "relayed",
        () => "failed",
      );
      const sessions = (state: string) =>
        db.any<{ pid: number }>(sql`
          SELECT pid FROM pg_stat_activity
          WHERE application_name = 'outbox-relay-22' AND datname = current_database() AND state = ${state}`);
      // The pass has claimed the rows and now waits for JetStream: no transaction of it is open meanwhile.
      await until(
        async () =>
          (
            await db.one<{ n: number }>(
              sql`SELECT count(*)::int AS n FROM rbac.outbox WHERE claimed_until > now()`,
            )
          ).n === 3,
      );
      expect(await sessions("idle in transaction")).toEqual([]);
      // Every connection of the relay's pool is terminated while it waits.
      await db.query(sql`
        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE application_name = 'outbox-relay-22' AND datname = current_database()`);
      nats.resume();
      expect(await pass).toBeTypeOf("string");
      // The process lives on (an unhandled 'error' event would have ended the test run), and the events
      // are relayed by the next passes once their claim is released or has expired.
      await until(async () => {
        await relay.relayOnce().catch(() => undefined);
        return (await relay.pending()) === 0;
      }, 30_000);
      expect((await streamed("outbox.held")).sort()).toEqual([...ids].sort());
    } finally {
      nats.resume();
      await relayDb.end();
    }
  }, 60_000);
});
