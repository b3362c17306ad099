/**
 * The delivery HTTP client: one POST with a bounded time and response size, no redirects, and the target
 * checked where it matters: on the address actually connected to (the DNS lookup of the connection
 * itself), so a name that resolves to a loopback, private, link-local or metadata address is refused even
 * if it resolved elsewhere a moment before. Networks listed in BackendHost__WebhookAllowedNetworks are
 * allowed (development and tests). IPv6 addresses that embed an IPv4 address (IPv4-compatible `::/96`,
 * NAT64, 6to4, Teredo) are refused, whatever the embedded address: none is a receiver's real address.
 *
 * Transport retries: within one attempt, a connection failure or a transient answer (408, 429,
 * 5xx) is retried twice with a short backoff, so one event can arrive up to 5 × 3 times, each time with
 * the same X-Svc-Delivery. A transient answer whose Retry-After asks for longer than the short backoff
 * ends the attempt at once instead (the job engine schedules the next attempt after it).
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { Agent as HttpAgent, type IncomingHttpHeaders, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";

import ipaddr from "ipaddr.js";

export class TargetRefusedError extends Error {
  override readonly name = "TargetRefusedError";
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** IPv4-compatible IPv6 (deprecated, RFC 4291 2.5.5.1): `::a.b.c.d` would reach a.b.c.d on some stacks. */
const IPV4_COMPATIBLE = ipaddr.parseCIDR("::/96");

function normalise(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  return parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()
    ? (parsed as ipaddr.IPv6).toIPv4Address()
    : parsed;
}

export function createTargetPolicy(allowedNetworks: readonly string[]) {
  const allowed: Range[] = allowedNetworks.map((n) => {
    if (n.includes("/")) return ipaddr.parseCIDR(n);
    const a = normalise(n);
    return [a, a.kind() === "ipv4" ? 32 : 128];
  });
  /** Only public unicast addresses, unless an allowed network covers the address. */
  return (address: string): boolean => {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = normalise(address);
    } catch {
      return false;
    }
    if (allowed.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range, bits))) return true;
    if (ip.kind() === "ipv6" && ip.match(IPV4_COMPATIBLE)) return false;
    return ip.range() === "unicast";
  };
}
export type TargetPolicy = ReturnType<typeof createTargetPolicy>;

/** True when the URL's host is an IP literal the policy refuses (names are judged on connection). */
export function isLiteralAddressRefused(url: URL, allowed: TargetPolicy): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  return ipaddr.isValid(host) && !allowed(host);
}

export interface DeliveryResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The first 4 KiB of the answer's body, as UTF-8 text (for the delivery log). */
  readonly excerpt: string;
}

/** How much of an answer's body the delivery log keeps. */
export const EXCERPT_BYTES = 4_096;

export interface PostOptions {
  readonly url: URL;
  readonly body: Buffer;
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly allowed: TargetPolicy;
}

/**
 * Keep-alive connections per receiver. The address check runs when a connection is opened, so a reused
 * connection is one whose address passed it.
 */
const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 64, timeout: 30_000 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 64, timeout: 30_000 });

const TRANSIENT = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "ECONNABORTED",
]);

function postOnce(o: PostOptions): Promise<DeliveryResponse> {
  const checkedLookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 4);
      const list = addresses;
      const refused = list.find((a) => !o.allowed(a.address));
      if (refused || list.length === 0) {
        return callback(new TargetRefusedError(`target ${hostname} resolves to a refused address`), "", 4);
      }
      const first = list[0] as LookupAddress;
      if ((options as { all?: boolean }).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      return callback(null, first.address, first.family);
    });
  };
  return new Promise((resolve, reject) => {
    if (isLiteralAddressRefused(o.url, o.allowed)) {
      reject(new TargetRefusedError(`target address ${o.url.hostname} is refused`));
      return;
    }
    const request = (o.url.protocol === "https:" ? httpsRequest : httpRequest)(
      o.url,
      {
        method: "POST",
        headers: { ...o.headers, "content-length": String(o.body.length) },
        lookup: checkedLookup,
        agent: o.url.protocol === "https:" ? httpsAgent : httpAgent,
      },
      (response) => {
        let received = 0;
        const kept: Buffer[] = [];
        response.on("data", (chunk: Buffer) => {
          if (received < EXCERPT_BYTES) kept.push(chunk.subarray(0, EXCERPT_BYTES - received));
          received += chunk.length;
          // Only the status and the excerpt matter; a large body is not read further.
          if (received > o.maxResponseBytes) response.destroy();
        });
        const done = () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            excerpt: Buffer.concat(kept).toString("utf8"),
          });
        response.on("end", done);
        response.on("close", done);
        response.on("error", done);
      },
    );
    // One deadline for the whole exchange (connect, send, answer); it also bounds an idle socket.
    const timer = setTimeout(
      () => request.destroy(Object.assign(new Error("webhook request timed out"), { code: "ETIMEDOUT" })),
      o.timeoutMs,
    );
    request.on("close", () => clearTimeout(timer));
    request.on("error", reject);
    request.end(o.body);
  });
}

/** Answers worth asking again within the attempt: timeout, too many requests, server errors. */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599);
}

/** The short backoff between transport retries: 100 ms, then 300 ms. */
export const transportBackoffMs = (retry: number) => 100 * 3 ** retry;

export interface PostResult extends DeliveryResponse {
  /** Requests sent in this attempt (1 to 1 + transportRetries). */
  readonly tries: number;
}

/**
 * One delivery attempt: the POST plus up to `transportRetries` retries on a connection failure or a
 * transient answer. Returns the last answer; throws the last connection error.
 */
export async function post(
  o: PostOptions,
  transportRetries = 2,
  retryAfterOf: (r: DeliveryResponse) => number | undefined = () => undefined,
): Promise<PostResult> {
  for (let retry = 0; ; retry++) {
    const backoff = transportBackoffMs(retry);
    try {
      const response = await postOnce(o);
      if (retry >= transportRetries || !isTransientStatus(response.status)) {
        return { ...response, tries: retry + 1 };
      }
      const asked = retryAfterOf(response);
      if (asked !== undefined && asked > backoff) return { ...response, tries: retry + 1 };
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (error instanceof TargetRefusedError || retry >= transportRetries || !code || !TRANSIENT.has(code))
        throw error;
    }
    await new Promise((r) => setTimeout(r, backoff));
  }
}
