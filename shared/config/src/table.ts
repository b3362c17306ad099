/**
 * Settings are declared once, in a table per owner (the platform here; each service in its own
 * `settings.ts`): name, type, default, whether it is a secret, what it does. Parsing, the configuration's
 * type (`ConfigOf<typeof settings>`: the platform's and the owner's, no other service's), the README's
 * table and the operator guide's list are all derived from the tables (`make settings-doc`; a test keeps
 * the docs in step).
 *
 * A process validates the tables its code registered: a service's own and the platform's. A setting is
 * read once at start-up, and a change needs a restart, except a setting marked `changeable`: a value
 * stored with `PUT /api/config/values` applies on every replica within a second (@svc/runtime's
 * live-settings.ts).
 */
import type { Reader } from "./reader.js";

/** One setting: where it is read from, how, and how the docs describe it. */
export interface SettingDef<T> {
  /** `NATS_URL`, or the spec form `BackendHost:RateLimitApiPerMinute` (written `BackendHost__…`). */
  readonly name: string;
  readonly doc: string;
  /** The default as the docs show it. */
  readonly defaultText: string;
  /** Never echoed in errors or logs; the docs say so. */
  readonly secret: boolean;
  /** How the variable is written in the docs when it is not just `name` (arrays, objects). */
  readonly display?: string;
  /** Derived from another setting: not listed in the docs. */
  readonly hidden?: boolean;
  /** What kind of value it takes (the configuration API's definitions). */
  readonly type?: "integer" | "string" | "boolean" | "enum" | "list" | "date-time" | "object";
  /** May be changed at run time through `PUT /api/config/values`; every replica applies it within a second. */
  readonly changeable?: boolean;
  readonly read: (r: Reader) => T;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type SettingTable = Readonly<Record<string, SettingDef<any>>>;

/** The values a table yields. */
export type SettingsOf<T extends SettingTable> = {
  readonly [K in keyof T]: T[K] extends SettingDef<infer V> ? V : never;
};

const code = (value: unknown) => `\`${String(value)}\``;
const envName = (name: string) => name.replaceAll(":", "__");

/** The builders of table entries. */
export const setting = {
  int(name: string, fallback: number, min: number, max: number, doc: string): SettingDef<number> {
    return {
      name,
      doc,
      defaultText: code(fallback),
      secret: false,
      type: "integer",
      read: (r) => r.int(name, fallback, min, max),
    };
  },
  string(
    name: string,
    fallback: string,
    doc: string,
    options: { check?: (value: string) => string | null; secret?: boolean; defaultText?: string } = {},
  ): SettingDef<string> {
    return {
      name,
      doc,
      defaultText: options.defaultText ?? code(fallback),
      secret: options.secret ?? false,
      type: "string",
      read: (r) => r.string(name, fallback, options.check),
    };
  },
  optionalString(name: string, doc: string, options: { secret?: boolean } = {}): SettingDef<string | null> {
    return {
      name,
      doc,
      defaultText: "unset",
      secret: options.secret ?? false,
      type: "string",
      read: (r) => r.optionalString(name),
    };
  },
  bool(name: string, fallback: boolean, doc: string): SettingDef<boolean> {
    return {
      name,
      doc,
      defaultText: code(fallback),
      secret: false,
      type: "boolean",
      read: (r) => r.bool(name, fallback),
    };
  },
  oneOf<T extends string>(name: string, fallback: T, allowed: readonly T[], doc: string): SettingDef<T> {
    return {
      name,
      doc,
      defaultText: code(fallback),
      secret: false,
      type: "enum",
      read: (r) => r.oneOf(name, fallback, allowed),
    };
  },
  list(
    name: string,
    doc: string,
    options: { secret?: boolean; defaultText?: string } = {},
  ): SettingDef<string[]> {
    return {
      name,
      doc,
      defaultText: options.defaultText ?? "none",
      secret: options.secret ?? false,
      display: `${envName(name)}__N`,
      type: "list",
      read: (r) => r.array(name),
    };
  },
  /**
   * A list of SHA-256 digests, kept as 64 lower-case hex digits: either case and `:` separators are read
   * (as other tools print them); an entry that is not a digest is a problem naming it, never a silent
   * mismatch.
   */
  sha256List(name: string, doc: string): SettingDef<string[]> {
    return {
      name,
      doc,
      defaultText: "none",
      secret: false,
      display: `${envName(name)}__N`,
      type: "list",
      read: (r) =>
        r.array(name).flatMap((raw, i) => {
          const digest = raw.trim().replaceAll(":", "").toLowerCase();
          if (/^[0-9a-f]{64}$/.test(digest)) return [digest];
          r.problems.push(
            `${envName(name)}__${i}: expected a SHA-256 digest, 64 hex digits (either case, ':' separators allowed), got ${JSON.stringify(raw.slice(0, 100))}`,
          );
          return [];
        }),
    };
  },
  date(name: string, doc: string): SettingDef<Date | null> {
    return { name, doc, defaultText: "none", secret: false, type: "date-time", read: (r) => r.date(name) };
  },
  /** Anything else: the entry reads itself. */
  custom<T>(def: SettingDef<T>): SettingDef<T> {
    return { type: "object", ...def };
  },
};

/** Marks a setting as changeable at run time (`PUT /api/config/values`). */
export function changeable<T>(def: SettingDef<T>): SettingDef<T> {
  return { ...def, changeable: true };
}

/** What the tables of one owner contribute: plain variables at the top level, `BackendHost:*` below. */
export interface SettingsDeclaration<Top extends SettingTable, Host extends SettingTable> {
  readonly owner: string;
  readonly top: Top;
  readonly backendHost: Host;
  /** Checks across settings, after every table was read (e.g. development keys refused in production). */
  readonly check?: (config: Record<string, unknown>, problems: string[]) => void;
}

/** Any owner's settings declaration. */
export type AnySettingsDeclaration = SettingsDeclaration<SettingTable, SettingTable>;

/**
 * An owner's settings, which type the owner's configuration. Nothing is registered: a parse reads the
 * declarations it is given (`parseConfig(env, { settings })`), so a process reads what it starts and no
 * import's side effect decides it:
 *
 *     export const settings = defineSettings({ owner: "gateway", top: {...}, backendHost: {...} });
 *     export type GatewayConfig = ConfigOf<typeof settings>;
 */
export function defineSettings<const Top extends SettingTable, const Host extends SettingTable>(
  declaration: SettingsDeclaration<Top, Host>,
): SettingsDeclaration<Top, Host> {
  return declaration;
}

/** One row of the settings reference (README, operator guide). */
export interface SettingRow {
  readonly variable: string;
  readonly owner: string;
  readonly defaultText: string;
  readonly secret: boolean;
  readonly doc: string;
}

/** The environment variable a setting is written as (`BackendHost__RateLimitApiPerMinute`, `X__N`). */
export function variableOf(def: SettingDef<unknown>): string {
  return def.display ?? envName(def.name);
}

/** The reference of the declarations' documented settings, in declaration order. */
export function describeSettings(declarations: readonly AnySettingsDeclaration[]): SettingRow[] {
  return declarations.flatMap((d) =>
    [...Object.values(d.top), ...Object.values(d.backendHost)]
      .filter((s) => s.hidden !== true)
      .map((s) => ({
        variable: variableOf(s),
        owner: d.owner,
        defaultText: s.defaultText,
        secret: s.secret,
        doc: s.doc,
      })),
  );
}
