/**
 * Reads raw settings (plain variables and the `BackendHost:X` tree) into typed values, collecting every
 * problem instead of stopping at the first, so one run lists all bad variables. Values whose name looks
 * like a secret are never echoed.
 *
 * Every setting may also come from a file: `<VARIABLE>_FILE` names it (`DATABASE_URL_FILE`,
 * `BackendHost__JwtSigningKey_FILE`), as a Kubernetes Secret mounted as files gives it; one trailing line
 * break is dropped. So a secret need not sit in the process's environment, which every process of the same
 * user on the host could otherwise read.
 */
import { readFileSync } from "node:fs";

import { getSetting, getSettingArray, type SettingTree } from "./settings-tree.js";

export type Env = Readonly<Record<string, string | undefined>>;

/** Collects every problem instead of stopping at the first, so one run lists all bad variables. */
export class Reader {
  readonly problems: string[] = [];
  constructor(
    private readonly env: Env,
    private readonly tree: SettingTree,
  ) {}

  private raw(name: string): { label: string; value: string } | undefined {
    const direct = this.direct(name);
    const file = this.fromFile(name);
    if (direct !== undefined && file !== undefined) {
      this.problems.push(`${direct.label}: set either ${direct.label} or ${direct.label}_FILE, not both`);
      return direct;
    }
    return direct ?? file;
  }

  /** The value of `<VARIABLE>_FILE`'s file, or a problem when it cannot be read. */
  private fromFile(name: string): { label: string; value: string } | undefined {
    const label = `${name.replaceAll(":", "__")}_FILE`;
    const path = name.includes(":") ? getSetting(this.tree, `${name}_FILE`) : this.env[label];
    if (path === undefined || path === "") return undefined;
    if (typeof path !== "string") {
      this.problems.push(`${label}: expected a file path`);
      return undefined;
    }
    try {
      const value = readFileSync(path, "utf8").replace(/\r?\n$/, "");
      return { label: name.replaceAll(":", "__"), value };
    } catch (error) {
      this.problems.push(
        `${label}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`,
      );
      return undefined;
    }
  }

  private direct(name: string): { label: string; value: string } | undefined {
    if (name.includes(":")) {
      const value = getSetting(this.tree, name);
      if (value === undefined) return undefined;
      const label = name.replaceAll(":", "__");
      if (typeof value !== "string") {
        this.problems.push(`${label}: expected a single value`);
        return undefined;
      }
      return { label, value };
    }
    const value = this.env[name];
    return value === undefined || value === "" ? undefined : { label: name, value };
  }

  string(name: string, fallback: string, check?: (v: string) => string | null): string {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const problem = check?.(raw.value) ?? null;
    if (problem !== null) {
      this.problems.push(`${raw.label}: ${problem} (got ${JSON.stringify(redact(raw.label, raw.value))})`);
      return fallback;
    }
    return raw.value;
  }

  optionalString(name: string): string | null {
    const raw = this.raw(name);
    return raw === undefined || raw.value.trim() === "" ? null : raw.value.trim();
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = Number(raw.value);
    if (!/^-?\d+$/.test(raw.value.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      this.problems.push(
        `${raw.label}: expected an integer from ${min} to ${max} (got ${JSON.stringify(raw.value)})`,
      );
      return fallback;
    }
    return value;
  }

  oneOf<T extends string>(name: string, fallback: T, allowed: readonly T[]): T {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = raw.value.trim().toLowerCase() as T;
    if (!allowed.includes(value)) {
      this.problems.push(
        `${raw.label}: expected one of ${allowed.join(", ")} (got ${JSON.stringify(raw.value)})`,
      );
      return fallback;
    }
    return value;
  }

  array(name: string): string[] {
    return getSettingArray(this.tree, name) ?? [];
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const v = raw.value.trim().toLowerCase();
    if (v === "true" || v === "1") return true;
    if (v === "false" || v === "0") return false;
    this.problems.push(`${raw.label}: expected true or false (got ${JSON.stringify(raw.value)})`);
    return fallback;
  }

  date(name: string): Date | null {
    const raw = this.raw(name);
    if (raw === undefined) return null;
    const d = new Date(raw.value);
    if (Number.isNaN(d.getTime())) {
      this.problems.push(`${raw.label}: expected an ISO 8601 date-time (got ${JSON.stringify(raw.value)})`);
      return null;
    }
    return d;
  }

  /**
   * An array of objects with string members (`X__0__PublisherId`, `X__0__PublicKey`, …): each entry's
   * `fields` (case-insensitive), missing ones as undefined. `\n` in values stands for a line break.
   */
  objects<F extends string>(name: string, fields: readonly F[]): Array<Partial<Record<F, string>>> {
    const node = getSetting(this.tree, name);
    if (node === undefined) return [];
    const label = name.replaceAll(":", "__");
    if (typeof node !== "object" || Array.isArray(node)) {
      this.problems.push(`${label}: expected __N__<Field> entries`);
      return [];
    }
    return Object.entries(node).map(([index, entry]) => {
      const out: Partial<Record<F, string>> = {};
      if (typeof entry !== "object" || Array.isArray(entry)) {
        this.problems.push(`${label}__${index}: expected ${fields.map((f) => `__${f}`).join(", ")}`);
        return out;
      }
      for (const field of fields) {
        const value = (entry as Record<string, unknown>)[field.toLowerCase()];
        if (typeof value === "string") out[field] = value.replaceAll("\\n", "\n");
      }
      return out;
    });
  }

  /** `Name` + `Permissions` objects under an array setting. */
  roles(name: string): Array<{ name: string; permissions: string[] }> {
    const node = getSetting(this.tree, name);
    if (node === undefined) return [];
    if (typeof node !== "object" || Array.isArray(node)) {
      this.problems.push(`${name.replaceAll(":", "__")}: expected __N__Name and __N__Permissions__M entries`);
      return [];
    }
    const roles: Array<{ name: string; permissions: string[] }> = [];
    for (const [index, entry] of Object.entries(node)) {
      const label = `${name.replaceAll(":", "__")}__${index}`;
      const roleName = typeof entry === "object" && !Array.isArray(entry) ? entry.name : undefined;
      if (typeof roleName !== "string" || !/^[a-z][a-z0-9._-]{0,62}$/.test(roleName)) {
        this.problems.push(`${label}__Name: expected a role name (lower case letters, digits, . _ -)`);
        continue;
      }
      roles.push({
        name: roleName,
        permissions: getSettingArray(this.tree, `${name}:${index}:permissions`) ?? [],
      });
    }
    return roles;
  }
}

const SECRET_NAME = /key|secret|password|token/i;
/** Addresses can carry credentials (`postgres://user:password@host`), in a form no pattern finds when broken. */
const ADDRESS_NAME = /url|uri|dsn|endpoint/i;
function redact(label: string, value: string): string {
  if (SECRET_NAME.test(label)) return "<redacted>";
  if (ADDRESS_NAME.test(label))
    return `<${value.length} characters, not shown: an address may hold credentials>`;
  return value;
}

export function urlCheck(protocols: readonly string[]) {
  return (value: string): string | null => {
    try {
      const url = new URL(value);
      return protocols.includes(url.protocol) ? null : `expected a ${protocols.join(" or ")} URL`;
    } catch {
      return "expected an absolute URL";
    }
  };
}

export const SUBJECT_TOKEN = /^[A-Za-z0-9_-]+$/;
