/**
 * Settings changed at run time. Values stored with `PUT /api/config/values` live in
 * the NATS KV bucket `<prefix>_config_values`, one key per variable (`BackendHost__RateLimitApiPerMinute`),
 * the raw text as an environment variable would hold it. Every replica of every service watches the bucket
 * and applies, for the settings it declares that are marked `changeable`, each stored value that its own
 * declaration accepts; users read `backendHost` when they need a value (the rate limiter per request, the
 * webhook client per attempt), so a change applies within a second and without a restart. A deleted key
 * returns the setting to its environment value or default.
 *
 * Every replica also answers `config.describe` (fan-out) with its settings: definition, value (secrets
 * never), source; and `config.check` with the problems it finds in proposed values. The configuration API
 * (the resolver) gathers both.
 */
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { ensureBucket, KvWatches } from "@svc/bus";
import {
  type AnySettingsDeclaration,
  type BackendHostSettings,
  buildSettingTree,
  type Config,
  getSetting,
  Reader,
  type SettingDef,
  variableOf,
} from "@svc/config";
import type { SettingDescription } from "@svc/contracts";
import type { Logger } from "@svc/observability";

export const configBucket = (prefix: string) => `${prefix}_config_values`;

interface Entry {
  readonly def: SettingDef<unknown>;
  readonly owner: string;
  readonly property: string;
  readonly scope: "top" | "backendHost";
}

/** The declarations' settings, by variable name. */
function declared(declarations: readonly AnySettingsDeclaration[]): Map<string, Entry> {
  const out = new Map<string, Entry>();
  for (const d of declarations) {
    for (const [property, def] of Object.entries(d.top)) {
      if (def.hidden !== true) out.set(variableOf(def), { def, owner: d.owner, property, scope: "top" });
    }
    for (const [property, def] of Object.entries(d.backendHost)) {
      if (def.hidden !== true) {
        out.set(variableOf(def), { def, owner: d.owner, property, scope: "backendHost" });
      }
    }
  }
  return out;
}

/**
 * An address setting's value with the credentials it may carry (`nats://user:password@host`, several
 * comma-separated) shown as `***`: what the configuration routes show of a setting that is not secret.
 */
export function withoutCredentials(text: string): string {
  return text
    .split(",")
    .map((part) => {
      let url: URL;
      try {
        url = new URL(part.trim());
      } catch {
        return part;
      }
      if (url.username === "" && url.password === "") return part;
      if (url.username !== "") url.username = "***";
      if (url.password !== "") url.password = "***";
      return url.toString();
    })
    .join(",");
}

function show(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "string") return withoutCredentials(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value.join(",");
  return null;
}

export class LiveSettings<B extends BackendHostSettings = BackendHostSettings> {
  private readonly entries: Map<string, Entry>;
  private readonly overrides = new Map<string, unknown>();
  private readonly watches = new KvWatches();
  private view: B;

  constructor(
    private readonly config: Config,
    /** The `BackendHost` settings as parsed: `config.backendHost`, typed as the service reads them. */
    private readonly parsed: B,
    private readonly log: Logger,
    /** The settings the service reads (the platform's and its own): those it describes and applies. */
    declarations: readonly AnySettingsDeclaration[],
  ) {
    this.entries = declared(declarations);
    this.view = parsed;
  }

  /** The `BackendHost` settings in force: the configuration with the stored changes applied. */
  get backendHost(): B {
    return this.view;
  }

  /** Parses `raw` with the setting's own declaration: the value, or the problem. */
  parse(variable: string, raw: string): { value: unknown } | { problem: string } {
    const entry = this.entries.get(variable);
    if (entry === undefined) return { problem: "is not a setting" };
    const env = { [variable]: raw };
    const reader = new Reader(env, buildSettingTree(env).tree);
    const value = entry.def.read(reader);
    return reader.problems.length > 0 ? { problem: reader.problems.join("; ") } : { value };
  }

  /** What `config.check` answers: which of the variables this process declares, and their problems. */
  check(values: Record<string, string | null>) {
    const owned: string[] = [];
    const problems: Array<{ variable: string; message: string }> = [];
    for (const [variable, raw] of Object.entries(values)) {
      const entry = this.entries.get(variable);
      if (entry === undefined) continue;
      owned.push(variable);
      if (entry.def.changeable !== true) {
        problems.push({ variable, message: "cannot be changed at run time (set it in the environment)" });
      } else if (raw !== null) {
        const parsed = this.parse(variable, raw);
        if ("problem" in parsed) problems.push({ variable, message: parsed.problem });
      }
    }
    return { owned, problems };
  }

  describe(): SettingDescription[] {
    return [...this.entries].map(([variable, e]) => {
      const stored = this.overrides.has(e.property);
      const inEnv = getSetting(this.config.settings, e.def.name) !== undefined;
      const current =
        e.scope === "top"
          ? (this.config as unknown as Record<string, unknown>)[e.property]
          : (this.view as unknown as Record<string, unknown>)[e.property];
      return {
        variable,
        owner: e.owner,
        type: e.def.type ?? "string",
        defaultText: e.def.defaultText,
        doc: e.def.doc,
        changeable: e.def.changeable === true,
        secret: e.def.secret,
        value: e.def.secret ? null : show(current),
        source: stored ? "stored" : inEnv ? "environment" : "default",
      };
    });
  }

  /** Watches the bucket (again, after a reconnect). */
  async start(nc: NatsConnection, prefix: string, replicas: number): Promise<void> {
    const follow = this.watches.renew();
    const kv: KV = await ensureBucket(nc, configBucket(prefix), { history: 1, replicas });
    await follow(kv, ">", (entry) =>
      this.apply(entry.key, entry.operation === "PUT" ? entry.string() : null),
    );
  }

  stop(): void {
    this.watches.stop();
  }

  private apply(variable: string, raw: string | null): void {
    const entry = this.entries.get(variable);
    if (entry === undefined || entry.def.changeable !== true || entry.scope !== "backendHost") return;
    if (raw === null) {
      if (!this.overrides.delete(entry.property)) return;
    } else {
      const parsed = this.parse(variable, raw);
      if ("problem" in parsed) {
        this.log.warn({ variable, problem: parsed.problem }, "a stored setting was refused");
        return;
      }
      this.overrides.set(entry.property, parsed.value);
    }
    this.view = Object.freeze({
      ...this.parsed,
      ...Object.fromEntries(this.overrides),
    });
    this.log.info({ variable, stored: raw !== null }, "a run-time setting changed");
  }
}
