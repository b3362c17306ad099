/**
 * The configuration API: definitions and effective values gathered from every running
 * service (each answers `config.describe`), and run-time values stored in the NATS KV bucket that every
 * replica watches (`@svc/runtime` LiveSettings). A value is stored only for a setting some running service
 * declares as changeable and accepts (each checks its own with `config.check`).
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

async function gather(bus: Bus): Promise<SettingDescription[]> {
  const replies = await messageClient(bus, configMessages).requestAll(
    "describe",
    {},
    { maxWaitMs: 2_000, stallMs: 200 },
  );
  if (replies.length === 0) throw new ServiceUnavailableError("config");
  const byVariable = new Map<string, SettingDescription>();
  for (const reply of replies)
    for (const s of reply.settings) if (!byVariable.has(s.variable)) byVariable.set(s.variable, s);
  return [...byVariable.values()].sort(
    (a, b) => a.owner.localeCompare(b.owner) || a.variable.localeCompare(b.variable),
  );
}

export interface ConfigDeps {
  readonly bus: Bus;
  readonly bucket: () => Promise<KV>;
}

export function configDeps(bus: Bus, prefix: string, replicas: number): ConfigDeps {
  let kv: Promise<KV> | undefined;
  return {
    bus,
    bucket: () => {
      kv ??= ensureBucket(bus.nc, configBucket(prefix), { history: 1, replicas }).catch((error: unknown) => {
        kv = undefined;
        throw error;
      });
      return kv;
    },
  };
}

type Handler<K extends keyof typeof configRoutes> = RouteHandlerWith<ConfigDeps, (typeof configRoutes)[K]>;

export const definitions: Handler<"config.definitions"> = async (deps) => ({
  status: 200,
  body: {
    items: (await gather(deps.bus)).map((s) => ({
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
    items: (await gather(deps.bus)).map((s) => ({
      variable: s.variable,
      owner: s.owner,
      value: s.secret ? null : s.value,
      source: s.source,
      secret: s.secret,
    })),
  },
});

async function stored(kv: KV): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const key of await kv.keys()) {
    const entry = await kv.get(key);
    if (entry !== null && entry.operation === "PUT") out[key] = entry.string();
  }
  return out;
}

export const putValues: Handler<"config.put"> = async (deps, req) => {
  const values = Object.fromEntries(
    Object.entries(req.body.values).map(([k, v]) => [k, v === null ? null : String(v)]),
  );
  const replies = await messageClient(deps.bus, configMessages).requestAll(
    "check",
    { values },
    { maxWaitMs: 2_000, stallMs: 200 },
  );
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
  const kv = await deps.bucket();
  for (const [variable, raw] of Object.entries(values)) {
    if (raw === null) await kv.delete(variable);
    else await kv.put(variable, raw);
  }
  return { status: 200, body: { stored: await stored(kv) } };
};
