/**
 * Hierarchical settings from environment variables, in the form the spec uses:
 * `BackendHost__RateLimitApiPerMinute=10` is the setting `BackendHost:RateLimitApiPerMinute`, and
 * `BackendHost__ApiKeys__0=a`, `BackendHost__ApiKeys__1=b` is the array `BackendHost:ApiKeys`.
 * Keys are case-insensitive (they are stored lower-cased), as in the configuration system the spec
 * describes.
 */
export type SettingValue = string | SettingTree | SettingValue[];
export interface SettingTree {
  [key: string]: SettingValue;
}

export interface SettingSource {
  /** The environment variable the value came from, for error messages. */
  readonly variable: string;
  readonly value: string;
}

export function buildSettingTree(env: Readonly<Record<string, string | undefined>>): {
  tree: SettingTree;
  sources: Map<string, SettingSource>;
} {
  const tree: SettingTree = {};
  const sources = new Map<string, SettingSource>();
  for (const [variable, value] of Object.entries(env)) {
    if (value === undefined || !variable.includes("__")) continue;
    const segments = variable.split("__").map((s) => s.toLowerCase());
    if (segments.some((s) => s.length === 0)) continue;
    let node: Record<string, SettingValue> = tree;
    for (const segment of segments.slice(0, -1)) {
      const next = node[segment];
      if (typeof next === "object" && next !== null) {
        node = next as Record<string, SettingValue>;
      } else {
        const created: SettingTree = {};
        node[segment] = created;
        node = created;
      }
    }
    node[segments.at(-1) as string] = value;
    sources.set(segments.join(":"), { variable, value });
  }
  return { tree, sources };
}

/** Reads `A:B:C` from the tree (case-insensitively). */
export function getSetting(tree: SettingTree, path: string): SettingValue | undefined {
  let node: SettingValue | undefined = tree;
  for (const segment of path.toLowerCase().split(":")) {
    if (typeof node !== "object" || node === null || Array.isArray(node)) return undefined;
    node = node[segment];
  }
  return node;
}

/**
 * Reads an array setting: children `0..n` of the node (numbered keys), in numeric order. A plain string
 * is accepted too, split on commas, so `BackendHost__ApiKeys=a,b` also works.
 */
export function getSettingArray(tree: SettingTree, path: string): string[] | undefined {
  const node = getSetting(tree, path);
  if (node === undefined) return undefined;
  if (typeof node === "string") {
    return node
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
  }
  if (Array.isArray(node)) return node.filter((v): v is string => typeof v === "string");
  return Object.entries(node)
    .filter(([key, value]) => /^\d+$/.test(key) && typeof value === "string")
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([, value]) => value as string);
}
