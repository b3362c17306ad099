/**
 * `theme.json`, read leniently: the canonical names or their aliases
 * (`key`/`id` → templateKey, `extends` → parentTemplateKey, `templates` → definitions, `description` →
 * helpText, `defaultValue` → value, `tab`/`section` → group), defaults (templatePath
 * `views/surface/{templateKey}.html`, scope `workspace`, isActive true, priority 100, field type `text`),
 * unknown members ignored. Only text that is not JSON, or a root that is not an object, is an error.
 */

export interface ThemeDefinition {
  readonly templateKey: string;
  readonly displayName: string;
  readonly templatePath: string;
  readonly parentTemplateKey: string | null;
  readonly surface: string;
  readonly scope: string;
  readonly isActive: boolean;
  readonly priority: number;
}

export interface ThemeField {
  readonly key: string;
  readonly label: string;
  readonly type: string;
  readonly helpText: string | null;
  /** The default value, serialised as a string (null: none). */
  readonly value: string | null;
  readonly required: boolean;
  readonly group: string | null;
  /** For `select`: the allowed values. */
  readonly options: readonly string[];
  readonly order: number;
}

export interface Theme {
  readonly surface: string;
  readonly definitions: readonly ThemeDefinition[];
  readonly fields: readonly ThemeField[];
}

export class ThemeError extends Error {}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const first = (o: Obj, ...names: string[]): unknown => names.map((n) => o[n]).find((v) => v !== undefined);
const text = (v: unknown): string | null =>
  typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : null;
const KEY = /^[A-Za-z0-9_.-]{1,100}$/;

/** Serialises a setting value as the settings store keeps it (strings as they are, the rest as JSON). */
export function serialiseValue(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  return typeof v === "string" ? v : JSON.stringify(v);
}

function option(v: unknown): string | null {
  if (isObj(v)) return text(first(v, "value", "key", "id"));
  return text(v);
}

/** Parses theme.json's text; throws a ThemeError only for text that is not a JSON object. */
export function parseTheme(source: string): Theme {
  let raw: unknown;
  try {
    raw = JSON.parse(source);
  } catch (error) {
    throw new ThemeError(`theme.json is not valid JSON: ${(error as Error).message}`);
  }
  if (!isObj(raw)) throw new ThemeError("theme.json is not a JSON object");
  const surface = text(raw.surface) ?? "workspace";
  const list = first(raw, "definitions", "templates");
  const definitions: ThemeDefinition[] = [];
  const seen = new Set<string>();
  for (const d of Array.isArray(list) ? list : []) {
    if (!isObj(d)) continue;
    const templateKey = text(first(d, "templateKey", "key", "id"));
    if (templateKey === null || !KEY.test(templateKey) || seen.has(templateKey)) continue;
    seen.add(templateKey);
    const priority = Number(first(d, "priority"));
    const path = text(d.templatePath);
    definitions.push({
      templateKey,
      displayName: text(d.displayName) ?? templateKey,
      templatePath: path !== null && safePath(path) ? path : `views/surface/${templateKey}.html`,
      parentTemplateKey: text(first(d, "parentTemplateKey", "extends")),
      surface: text(d.surface) ?? surface,
      scope: text(d.scope) ?? "workspace",
      isActive: typeof d.isActive === "boolean" ? d.isActive : true,
      priority: Number.isFinite(priority) ? Math.trunc(priority) : 100,
    });
  }
  const config = isObj(raw.config) ? raw.config : {};
  const fieldsRaw = isObj(config.fields) ? config.fields : {};
  const fields: ThemeField[] = [];
  for (const [key, f] of Object.entries(fieldsRaw)) {
    if (!KEY.test(key) || !isObj(f)) continue;
    const order = Number(f.order);
    const options = Array.isArray(f.options)
      ? f.options.map(option).filter((o): o is string => o !== null)
      : [];
    fields.push({
      key,
      label: text(f.label) ?? key,
      type: (text(f.type) ?? "text").toLowerCase(),
      helpText: text(first(f, "helpText", "description")),
      value: serialiseValue(first(f, "value", "defaultValue")),
      required: f.required === true,
      group: text(first(f, "group", "tab", "section")),
      options,
      order: Number.isFinite(order) ? order : 0,
    });
  }
  fields.sort((a, b) => a.order - b.order || a.key.localeCompare(b.key));
  return { surface, definitions, fields };
}

/** A relative path inside the package: no absolute path, no `..`, no backslash. */
function safePath(path: string): boolean {
  return (
    path.length <= 300 &&
    !path.startsWith("/") &&
    !path.includes("\\") &&
    path.split("/").every((s) => s !== ".." && s !== "")
  );
}

/**
 * Checks a value for a field: the problem in words, or null when it is valid. Types: `text` (at most 2,000
 * characters), `color` (#rgb, #rrggbb or #rrggbbaa), `number`, `boolean` (true/false), `select` (one of
 * the options), `url` (http or https); any other type is treated as text.
 */
export function checkValue(field: ThemeField, value: string): string | null {
  if (value.length > 2_000) return "is longer than 2000 characters";
  if (field.required && value.trim() === "") return "is required";
  if (value === "" && !field.required) return null;
  switch (field.type) {
    case "color":
      return /^#(?:[0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/i.test(value)
        ? null
        : "is not a colour (#rgb, #rrggbb or #rrggbbaa)";
    case "number":
      return value.trim() !== "" && Number.isFinite(Number(value)) ? null : "is not a number";
    case "boolean":
      return value === "true" || value === "false" ? null : "is not true or false";
    case "select":
      return field.options.includes(value) ? null : `is not one of ${field.options.join(", ")}`;
    case "date":
      return /^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(value))
        ? null
        : "is not a date (YYYY-MM-DD)";
    case "email":
      return /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@]{1,63}$/.test(value) ? null : "is not an e-mail address";
    case "url":
      try {
        const u = new URL(value);
        return u.protocol === "https:" || u.protocol === "http:" ? null : "is not an http(s) URL";
      } catch {
        return "is not a URL";
      }
    default:
      return null;
  }
}
