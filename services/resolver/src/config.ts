/**
 * The configuration API: definitions and effective values gathered from every running
 * service (each answers `config.describe`), and run-time values stored in the NATS KV bucket that every
 * replica watches (`@svc/runtime` LiveSettings). A value is stored only for a setting some running service
 * declares as changeable and accepts (each checks its own with `config.check`).
 *
 * The routes ask `ConfigDeps` (`configDeps` asks the bus and the bucket), so their rules are unit-tested
 * with the services' answers and the stored values in memory.
 */
import type { KV } from "@nats-io/kv";
import type { Bus } from "@svc/bus";
import { ensureBucket } from "@svc/bus";
import {
  configMessages,
  type configRoutes,
  messageClient,
  type RouteHandlerWith,
  type SettingDescription,
} from "@svc/contracts";
import { ServiceUnavailableError, ValidationError } from "@svc/errors";
import { configBucket } from "@svc/runtime";

/** One running replica's answer to a proposed change: the settings it owns, what is wrong with the values. */
export interface CheckReply {
  readonly owned: readonly string[];
  readonly problems: ReadonlyArray<{ readonly variable: string; readonly message: string }>;
}

/** The running services, asked over the bus, and the stored values (a NATS KV bucket). */
export interface ConfigDeps {
  /** Every running replica's settings (none when no replica answers). */
  describe(): Promise<ReadonlyArray<{ readonly settings: readonly SettingDescription[] }>>;
  /** Every running replica's verdict on the proposed values (null: back to the default). */
  check(values: Readonly<Record<string, string | null>>): Promise<readonly CheckReply[]>;
  /** Stores and removes values, then answers every stored value. */
  store(values: Readonly<Record<string, string | null>>): Promise<Record<string, string>>;
}

const ASK = { maxWaitMs: 2_000, stallMs: 200 };

async function stored(kv: KV): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const key of await kv.keys()) {
    const entry = await kv.get(key);
    if (entry !== null && entry.operation === "PUT") out[key] = entry.string();
  }
  return out;
}

/** The configuration API's dependencies over the bus and the `<prefix>` config bucket. */
export function configDeps(bus: Bus, prefix: string, replicas: number): ConfigDeps {
  let kv: Promise<KV> | undefined;
  const bucket = () => {
    kv ??= ensureBucket(bus.nc, configBucket(prefix), { history: 1, replicas }).catch((error: unknown) => {
      kv = undefined;
      throw error;
    });
    return kv;
  };
  const client = messageClient(bus, configMessages);
  return {
    describe: () => client.requestAll("describe", {}, ASK),
    check: (values) => client.requestAll("check", { values: { ...values } }, ASK),
    async store(values) {
      const kv = await bucket();
      for (const [variable, raw] of Object.entries(values)) {
        if (raw === null) await kv.delete(variable);
        else await kv.put(variable, raw);
      }
      return stored(kv);
    },
  };
}

/** Every setting the running services declare, once each (the first replica's description), by owner. */
async function gather(deps: ConfigDeps): Promise<SettingDescription[]> {
  const replies = await deps.describe();
  if (replies.length === 0) throw new ServiceUnavailableError("config");
  const byVariable = new Map<string, SettingDescription>();
  for (const reply of replies)
    for (const s of reply.settings) if (!byVariable.has(s.variable)) byVariable.set(s.variable, s);
  return [...byVariable.values()].sort(
    (a, b) => a.owner.localeCompare(b.owner) || a.variable.localeCompare(b.variable),
  );
}

type Handler<K extends keyof typeof configRoutes> = RouteHandlerWith<ConfigDeps, (typeof configRoutes)[K]>;

export const definitions: Handler<"config.definitions"> = async (deps) => ({
  status: 200,
  body: {
    items: (await gather(deps)).map((s) => ({
      variable: s.variable,
      owner: s.owner,
      type: s.type,
      defaultText: s.defaultText,
      description: s.doc,
      changeable: s.changeable,
      secret: s.secret,
    })),
  },
});

export const effective: Handler<"config.effective"> = async (deps) => ({
  status: 200,
  body: {
    items: (await gather(deps)).map((s) => ({
      variable: s.variable,
      owner: s.owner,
      value: s.secret ? null : s.value,
      source: s.source,
      secret: s.secret,
    })),
  },
});

export const putValues: Handler<"config.put"> = async (deps, req) => {
  const values = Object.fromEntries(
    Object.entries(req.body.values).map(([k, v]) => [k, v === null ? null : String(v)]),
  );
  const replies = await deps.check(values);
  if (replies.length === 0) throw new ServiceUnavailableError("config");
  const owned = new Set(replies.flatMap((r) => r.owned));
  const problems = new Map<string, string>();
  for (const r of replies)
    for (const p of r.problems) if (!problems.has(p.variable)) problems.set(p.variable, p.message);
  const violations = Object.keys(values).flatMap((variable) => {
    const field = `/body/values/${variable}`;
    if (!owned.has(variable)) return [{ field, message: "is not a setting of any running service" }];
    const problem = problems.get(variable);
    return problem === undefined ? [] : [{ field, message: problem }];
  });
  if (violations.length > 0) throw new ValidationError(violations);
  return { status: 200, body: { stored: await deps.store(values) } };
};
