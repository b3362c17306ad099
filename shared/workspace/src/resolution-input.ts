/**
 * The inputs of workspace resolution: the public host and path of a request, normalised the
 * same way at the gateway (for its cache key) and at the resolver (which trusts no caller).
 *
 * Host: `X-Forwarded-Host` when present (first entry of a comma list), else `Host`; lower-cased, port and
 * trailing dot removed, IPv6 brackets kept. Path: `X-Forwarded-Uri` (or an explicit path) with query and
 * fragment dropped, dot segments resolved, duplicate and trailing slashes removed; `/` when absent.
 */

export const MAX_HOST_LENGTH = 253;
export const MAX_PATH_LENGTH = 2048;

const HOST_PATTERN = /^(\[[0-9a-f:.]+\]|[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?)$/;

/** Returns the normalised host, or null when the value cannot be a host name. */
export function normaliseHost(raw: string | undefined | null): string | null {
  if (raw === undefined || raw === null) return null;
  let host = (raw.split(",")[0] ?? "").trim().toLowerCase();
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    if (end === -1) return null;
    host = host.slice(0, end + 1);
  } else {
    const colon = host.indexOf(":");
    if (colon !== -1) host = host.slice(0, colon);
    if (host.endsWith(".")) host = host.slice(0, -1);
  }
  if (host.length === 0 || host.length > MAX_HOST_LENGTH || !HOST_PATTERN.test(host)) return null;
  return host;
}

/** Returns the normalised path; anything unusable becomes `/`. */
export function normalisePath(raw: string | undefined | null): string {
  if (raw === undefined || raw === null || raw.length === 0 || raw.length > MAX_PATH_LENGTH) return "/";
  let pathname: string;
  try {
    // Slashes are collapsed first: `//x` would otherwise parse as a host. Then URL resolves `.`/`..`
    // segments and percent-encodes consistently; the base is never part of the output.
    const collapsed = `/${raw}`.replace(/[\\/]{2,}/g, "/");
    pathname = new URL(collapsed, "http://h").pathname;
  } catch {
    return "/";
  }
  // Dot segments again, by hand: Node 20's parser leaves them after a segment such as `.x`.
  const segments: string[] = [];
  for (const segment of pathname.split("/")) {
    const dots = segment.toLowerCase().replaceAll("%2e", ".");
    if (segment === "" || dots === ".") continue;
    if (dots === "..") segments.pop();
    else segments.push(segment);
  }
  pathname = `/${segments.join("/")}`;
  // Percent-encoding can make a path that was within the limit longer than it: such a path is unusable.
  return pathname.length > MAX_PATH_LENGTH ? "/" : pathname;
}

/** True when `prefix` (a normalised binding path) covers `path` at a segment boundary. */
export function pathHasPrefix(path: string, prefix: string): boolean {
  if (prefix === "/") return true;
  return path === prefix || path.startsWith(`${prefix}/`);
}
