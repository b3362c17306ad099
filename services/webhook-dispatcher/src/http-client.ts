/**
 * The delivery HTTP client: one POST with a bounded time and response size, no redirects, and the target
 * checked where it matters: on the address actually connected to (the DNS lookup of the connection
 * itself), so a name that resolves to a loopback, private, link-local or metadata address is refused even
 * if it resolved elsewhere a moment before. Networks listed in BackendHost__WebhookAllowedNetworks are
 * allowed (development and tests). Connection failures are retried twice within the attempt.
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
    return ip.range() === "unicast";
  };
}
export type TargetPolicy = ReturnType<typeof createTargetPolicy>;

export interface DeliveryResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
}

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
    const host = o.url.hostname.replace(/^\[|\]$/g, "");
    if (ipaddr.isValid(host) && !o.allowed(host)) {
      reject(new TargetRefusedError(`target address ${host} is refused`));
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
        response.on("data", (chunk: Buffer) => {
          received += chunk.length;
          // Only the status matters; a large body is not read further.
          if (received > o.maxResponseBytes) response.destroy();
        });
        const done = () => resolve({ status: response.statusCode ?? 0, headers: response.headers });
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

/** One delivery attempt: the POST plus up to two transport retries on connection failures. */
export async function post(o: PostOptions, transportRetries = 2): Promise<DeliveryResponse> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await postOnce(o);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (error instanceof TargetRefusedError || attempt >= transportRetries || !code || !TRANSIENT.has(code))
        throw error;
      await new Promise((r) => setTimeout(r, 100 * 3 ** attempt));
    }
  }
}
