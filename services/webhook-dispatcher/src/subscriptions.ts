/** Subscription management and matching of published events to subscriptions. */
import { randomBytes, randomUUID } from "node:crypto";

import { listWorkspace, reachWorkspace } from "@svc/access";
import type { Principal } from "@svc/bus";
import {
  type PlatformEventName,
  platformEvents,
  type ReplyOfRoute,
  type RequestOfRoute,
  SUBSCRIPTION_PATTERN,
  type webhookRoutes,
} from "@svc/contracts";
import { type Db, type Listing, type Queries, readPage, sql, toPage } from "@svc/db";
import { NotFoundError, ValidationError, type Violation } from "@svc/errors";

import type { CircuitBreaker } from "./circuit-breaker.js";
import { receiverKey } from "./deliver.js";
import { isLiteralAddressRefused, type TargetPolicy } from "./http-client.js";
import { patternsMatching } from "./patterns.js";
import { inWorkspace, newestFirst } from "./scoped-tables.js";
import type { SecretBox } from "./secrets.js";
import { ed25519KeyPair, secretViolations, WHSEC_PREFIX } from "./standard-webhooks.js";

export const EVENT_PATTERN = new RegExp(SUBSCRIPTION_PATTERN);
type Routes = typeof webhookRoutes;
/** Newest first by (created_at, id). */
const SUBSCRIPTIONS: Listing = { tag: "webhooks", kinds: ["timestamp", "uuid"] };
const SUBSCRIPTIONS_TABLE = sql`webhook_dispatcher.subscriptions`;

export interface Row {
  id: string;
  workspace_key: string | null;
  event_name: string;
  target_url: string;
  is_active: boolean;
  include_sensitive_data: boolean;
  description: string;
  throttle_per_second: number | null;
  /** The custom headers' names (their values are sealed apart). */
  header_names: string[];
  /** The `whpk_` public key of its `v1a,` signatures (null: it signs `v1,` only). */
  ed25519_public_key: string | null;
  created_at: Date;
  updated_at: Date;
  /** Until when the replaced secret signs too; null when none does (expired ones read as null). */
  previous_secret_expires_at: Date | null;
}

/**
 * Every pattern that matches some catalogue event (for `matchesKnownEvent`): the union of
 * `patternsMatching` over the catalogue, made once per answer, so each row is one lookup.
 */
export async function knownPatterns(db: Queries): Promise<ReadonlySet<string>> {
  const rows = await db.any<{ event_name: string }>(
    sql`SELECT event_name FROM webhook_dispatcher.event_catalog`,
  );
  return new Set(rows.flatMap((r) => patternsMatching(r.event_name)));
}

function view(row: Row, known: ReadonlySet<string>) {
  return {
    id: row.id,
    workspaceKey: row.workspace_key,
    eventName: row.event_name,
    targetUrl: row.target_url,
    isActive: row.is_active,
    includeSensitiveData: row.include_sensitive_data,
    description: row.description,
    throttlePerSecond: row.throttle_per_second,
    headerNames: row.header_names,
    ed25519PublicKey: row.ed25519_public_key,
    createdAtUtc: row.created_at.toISOString(),
    updatedAtUtc: row.updated_at.toISOString(),
    previousSecretExpiresAtUtc: row.previous_secret_expires_at?.toISOString() ?? null,
    // Computed on read, never stored.
    matchesKnownEvent: known.has(row.event_name),
  };
}

/**
 * What the body's schema cannot say about a target URL (its length and the other fields are checked by
 * the route's contract): an absolute http(s) URL without credentials, and no literal address webhooks may
 * not reach.
 */
export function targetUrlViolations(targetUrl: string, allowed?: TargetPolicy): Violation[] {
  let url: URL | undefined;
  try {
    url = new URL(targetUrl);
  } catch {
    url = undefined;
  }
  if (
    url === undefined ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.username ||
    url.password
  ) {
    return [
      {
        field: "/body/targetUrl",
        message: "is required and must be an absolute http(s) URL without credentials",
      },
    ];
  }
  if (allowed !== undefined && isLiteralAddressRefused(url, allowed)) {
    // Names are checked again on every connection; a literal address can be judged now.
    return [
      {
        field: "/body/targetUrl",
        message: "names an address webhooks may not reach (loopback, private, link-local or reserved)",
      },
    ];
  }
  return [];
}

/**
 * Headers a subscription may not set: the platform's own (its signatures and ids, the trace context),
 * those the HTTP client sets, and HTTP's hop-by-hop ones.
 */
const RESERVED_HEADERS = new Set([
  "host",
  "content-type",
  "content-length",
  "content-encoding",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "upgrade",
  "proxy-authorization",
  "proxy-connection",
  "expect",
  "user-agent",
  "traceparent",
  "tracestate",
]);
const RESERVED_PREFIXES = ["x-svc-", "webhook-", "svix-", "svc-"];

/** What is wrong with a subscription's custom headers (the schema has checked their form). */
export function headerViolations(headers: Readonly<Record<string, string>> | undefined): Violation[] {
  const out: Violation[] = [];
  const seen = new Set<string>();
  for (const name of Object.keys(headers ?? {})) {
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower) || RESERVED_PREFIXES.some((p) => lower.startsWith(p)))
      out.push({
        field: `/body/headers/${name}`,
        message: `'${name}' is set by the platform or by HTTP itself`,
      });
    else if (seen.has(lower))
      out.push({
        field: `/body/headers/${name}`,
        message: `'${name}' is given twice (names are case-insensitive)`,
      });
    seen.add(lower);
  }
  return out;
}

/** A new ed25519 key pair, the private key sealed. */
function newKeys(secrets: SecretBox): Ed25519Keys {
  const pair = ed25519KeyPair();
  return { privateSealed: secrets.seal(pair.privatePkcs8), publicKey: pair.publicKey };
}

/** The headers as stored: undefined when the body left them out, null when it gave none. */
function sealHeaders(
  secrets: SecretBox,
  headers: Readonly<Record<string, string>> | undefined,
): SealedHeaders | null | undefined {
  if (headers === undefined) return undefined;
  const names = Object.keys(headers).sort();
  return names.length === 0 ? null : { names, sealed: secrets.seal(JSON.stringify(headers)) };
}

/** A subscription to add: its secret already sealed. */
export interface NewSubscription {
  readonly workspaceKey: string | null;
  readonly eventName: string;
  readonly targetUrl: string;
  readonly secretSealed: string;
  readonly includeSensitiveData: boolean;
  readonly description: string;
  readonly throttlePerSecond: number | null;
  readonly headers: SealedHeaders | null;
  readonly ed25519: Ed25519Keys | null;
  readonly isActive: boolean;
}

/** An ed25519 key pair as stored: the private key sealed, the public in the `whpk_` form. */
export interface Ed25519Keys {
  readonly privateSealed: string;
  readonly publicKey: string;
}

/** Custom headers as stored: the names in clear, the names and values sealed. */
export interface SealedHeaders {
  readonly names: readonly string[];
  readonly sealed: string;
}

/**
 * A subscription's new settings: `secretSealed` null keeps the stored secret, `headers` undefined the
 * stored headers (null removes them).
 */
export interface SubscriptionChange {
  readonly eventName: string;
  readonly targetUrl: string;
  readonly secretSealed: string | null;
  readonly includeSensitiveData: boolean;
  readonly description: string;
  readonly throttlePerSecond: number | null;
  readonly headers?: SealedHeaders | null;
  /** A new key pair (`ed25519` turned on), null (turned off), undefined (unchanged, or kept). */
  readonly ed25519?: Ed25519Keys | null;
}

/**
 * What the subscription routes ask of their tables (the rules, reach above all, stay in the handlers):
 * `within` is the one workspace a change may touch, null for any.
 */
export interface SubscriptionRepository {
  insert(subscription: NewSubscription): Promise<Row>;
  /** Newest first by (created_at, id), after the page's cursor, one more than the limit. */
  page(
    workspaceKey: string | null,
    page: ReturnType<typeof readPage>,
  ): Promise<Array<Row & { created_at_us: string }>>;
  setActive(id: string, within: string | null, isActive: boolean): Promise<Row | null>;
  replace(id: string, within: string | null, change: SubscriptionChange): Promise<Row | null>;
  /**
   * Seals in a new secret; the current one signs beside it for `overlapSeconds` (none when 0). A secret
   * replaced before and still signing is dropped: two at most.
   */
  rotate(
    id: string,
    within: string | null,
    secretSealed: string,
    overlapSeconds: number,
  ): Promise<Row | null>;
  remove(id: string, within: string | null): Promise<boolean>;
  /** One subscription, or null. */
  find(id: string, within: string | null): Promise<Row | null>;
  /** The patterns that match some event of the catalogue (`matchesKnownEvent`). */
  knownPatterns(): Promise<ReadonlySet<string>>;
  /** The catalogue's rows: a plugin's event with the schema and example it declared (null: none). */
  catalog(): Promise<
    Array<{ eventName: string; source: string; description: string; schema: unknown; example: unknown }>
  >;
}

const COLUMNS = sql`id, workspace_key, event_name, target_url, is_active, include_sensitive_data, description,
  throttle_per_second, header_names, ed25519_public_key,
  created_at, updated_at,
  CASE WHEN previous_secret_expires_at > now() THEN previous_secret_expires_at END
    AS previous_secret_expires_at`;

/** The subscription tables in PostgreSQL. */
export function subscriptionTables(db: Db): SubscriptionRepository {
  return {
    insert: (s) =>
      db.one<Row>(sql`
        INSERT INTO webhook_dispatcher.subscriptions
          (id, workspace_key, event_name, target_url, secret_encrypted, include_sensitive_data,
           description, is_active, throttle_per_second, header_names, headers_sealed,
           ed25519_private_sealed, ed25519_public_key)
        VALUES (${randomUUID()}, ${s.workspaceKey}, ${s.eventName}, ${s.targetUrl}, ${s.secretSealed},
                ${s.includeSensitiveData}, ${s.description}, ${s.isActive}, ${s.throttlePerSecond},
                ${[...(s.headers?.names ?? [])]}::text[], ${s.headers?.sealed ?? null},
                ${s.ed25519?.privateSealed ?? null}, ${s.ed25519?.publicKey ?? null})
        RETURNING ${COLUMNS}`),
    page: (workspaceKey, page) => newestFirst<Row>(db, SUBSCRIPTIONS_TABLE, COLUMNS, workspaceKey, page),
    setActive: (id, within, isActive) =>
      db.maybeOne<Row>(sql`
        UPDATE webhook_dispatcher.subscriptions
        SET is_active = ${isActive}, updated_at = now(),
            -- Turned on again, it starts from the events that occur from now on.
            resumed_at = CASE WHEN ${isActive} AND NOT is_active THEN now() ELSE resumed_at END,
            -- Turned on again, it starts healthy: its failing period begins at its next failure.
            failing_since = CASE WHEN ${isActive} THEN NULL ELSE failing_since END,
            failing_attempts = CASE WHEN ${isActive} THEN 0 ELSE failing_attempts END
        WHERE id = ${id} AND ${inWorkspace(within)}
        RETURNING ${COLUMNS}`),
    replace: (id, within, c) =>
      db.maybeOne<Row>(sql`
        UPDATE webhook_dispatcher.subscriptions
        SET event_name = ${c.eventName}, target_url = ${c.targetUrl},
            secret_encrypted = coalesce(${c.secretSealed}::text, secret_encrypted),
            -- A secret set by hand replaces every other at once.
            previous_secret_encrypted = CASE WHEN ${c.secretSealed}::text IS NULL
              THEN previous_secret_encrypted END,
            previous_secret_expires_at = CASE WHEN ${c.secretSealed}::text IS NULL
              THEN previous_secret_expires_at END,
            include_sensitive_data = ${c.includeSensitiveData}, description = ${c.description},
            throttle_per_second = ${c.throttlePerSecond},
            -- Left out, the custom headers stay only while the target does: their values (a receiver's
            -- credentials) never go to another URL.
            header_names = CASE WHEN ${c.headers !== undefined} THEN ${[...(c.headers?.names ?? [])]}::text[]
              WHEN target_url = ${c.targetUrl} THEN header_names ELSE '{}'::text[] END,
            headers_sealed = CASE WHEN ${c.headers !== undefined} THEN ${c.headers?.sealed ?? null}::text
              WHEN target_url = ${c.targetUrl} THEN headers_sealed END,
            ed25519_private_sealed = CASE WHEN ${c.ed25519 !== undefined}
              THEN ${c.ed25519?.privateSealed ?? null}::text ELSE ed25519_private_sealed END,
            ed25519_public_key = CASE WHEN ${c.ed25519 !== undefined}
              THEN ${c.ed25519?.publicKey ?? null}::text ELSE ed25519_public_key END,
            updated_at = now()
        WHERE id = ${id} AND ${inWorkspace(within)}
        RETURNING ${COLUMNS}`),
    rotate: (id, within, secretSealed, overlapSeconds) =>
      db.maybeOne<Row>(sql`
        UPDATE webhook_dispatcher.subscriptions
        SET previous_secret_encrypted = CASE WHEN ${overlapSeconds} > 0 THEN secret_encrypted END,
            previous_secret_expires_at =
              CASE WHEN ${overlapSeconds} > 0 THEN now() + make_interval(secs => ${overlapSeconds}) END,
            secret_encrypted = ${secretSealed}, updated_at = now()
        WHERE id = ${id} AND ${inWorkspace(within)}
        RETURNING ${COLUMNS}`),
    remove: async (id, within) =>
      (await db.maybeOne(sql`
        DELETE FROM webhook_dispatcher.subscriptions WHERE id = ${id} AND ${inWorkspace(within)}
        RETURNING id`)) !== null,
    find: (id, within) =>
      db.maybeOne<Row>(sql`
        SELECT ${COLUMNS} FROM webhook_dispatcher.subscriptions WHERE id = ${id} AND ${inWorkspace(within)}`),
    knownPatterns: () => knownPatterns(db),
    catalog: () =>
      db.any(sql`
        SELECT event_name AS "eventName", source, description, schema, example
        FROM webhook_dispatcher.event_catalog ORDER BY event_name`),
  };
}

/** The subscription if the session reaches it (its workspace's, or any for a platform session); else 404. */
export async function reachableSubscription(
  tables: SubscriptionRepository,
  id: string,
  principal: Principal,
): Promise<Row> {
  const row = await tables.find(id, reachWorkspace(principal));
  if (row === null) throw new NotFoundError(`Subscription '${id}' was not found.`);
  return row;
}

export async function createSubscription(
  tables: SubscriptionRepository,
  secrets: SecretBox,
  allowed: TargetPolicy,
  req: RequestOfRoute<Routes["webhooks.create"]>,
): Promise<ReplyOfRoute<Routes["webhooks.create"]>> {
  const body = req.body;
  const violations = [
    ...targetUrlViolations(body.targetUrl, allowed),
    ...secretViolations(body.secret),
    ...headerViolations(body.headers),
  ];
  if (violations.length > 0) throw new ValidationError(violations);
  // A workspace session subscribes its own workspace; naming another is as if it did not exist. A
  // platform session's subscription without a workspace covers every workspace.
  // A blank workspace key is `default`, never stored blank.
  const named = body.workspaceKey?.trim() === "" ? "default" : (body.workspaceKey ?? undefined);
  const row = await tables.insert({
    workspaceKey: listWorkspace(req.principal, named) ?? null,
    eventName: body.eventName,
    targetUrl: body.targetUrl,
    secretSealed: secrets.seal(body.secret),
    includeSensitiveData: body.includeSensitiveData === true,
    description: body.description ?? "",
    throttlePerSecond: body.throttlePerSecond ?? null,
    headers: sealHeaders(secrets, body.headers) ?? null,
    ed25519: body.ed25519 === true ? newKeys(secrets) : null,
    isActive: body.isActive ?? true,
  });
  return {
    status: 201,
    body: view(row, await tables.knownPatterns()),
    headers: { location: `/api/webhooks/${row.id}` },
  };
}

/** Paged newest first by (created_at, id); `cursor` is the opaque `nextCursor` of the previous page. */
export async function listSubscriptions(
  tables: SubscriptionRepository,
  req: RequestOfRoute<Routes["webhooks.list"]>,
): Promise<ReplyOfRoute<Routes["webhooks.list"]>> {
  const q = req.query;
  const page = readPage(q, SUBSCRIPTIONS);
  const requested = q.workspaceKey?.trim() === "" ? "default" : q.workspaceKey;
  const rows = await tables.page(listWorkspace(req.principal, requested) ?? null, page);
  const known = await tables.knownPatterns();
  const body = toPage(
    rows,
    page.limit,
    SUBSCRIPTIONS,
    (last) => [last.created_at_us, last.id],
    (r) => view(r, known),
  );
  return { status: 200, body };
}

export async function setActivation(
  tables: SubscriptionRepository,
  req: RequestOfRoute<Routes["webhooks.activation"]>,
): Promise<ReplyOfRoute<Routes["webhooks.activation"]>> {
  const row = await tables.setActive(req.params.id, reachWorkspace(req.principal), req.query.isActive);
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 200, body: view(row, await tables.knownPatterns()) };
}

/**
 * Replaces what a subscription delivers, where, and how it is signed, with the checks of create. What the
 * body leaves out takes its default (no sensitive data, no description), except the secret: left out, the
 * stored one stays. The workspace and the activation are not changed here.
 */
export async function replaceSubscription(
  tables: SubscriptionRepository,
  secrets: SecretBox,
  allowed: TargetPolicy,
  req: RequestOfRoute<Routes["webhooks.put"]>,
): Promise<ReplyOfRoute<Routes["webhooks.put"]>> {
  const body = req.body;
  const within = reachWorkspace(req.principal);
  const violations = [
    ...targetUrlViolations(body.targetUrl, allowed),
    ...(body.secret === undefined ? [] : secretViolations(body.secret)),
    ...headerViolations(body.headers),
  ];
  if (violations.length > 0) throw new ValidationError(violations);
  // Off: none. On: a new key pair, unless it has one (kept, so its receivers' public key stays good).
  let keys: Ed25519Keys | null | undefined;
  if (body.ed25519 === false) keys = null;
  else if (body.ed25519 === true && !(await tables.find(req.params.id, within))?.ed25519_public_key)
    keys = newKeys(secrets);
  const row = await tables.replace(req.params.id, within, {
    eventName: body.eventName,
    targetUrl: body.targetUrl,
    secretSealed: body.secret === undefined ? null : secrets.seal(body.secret),
    includeSensitiveData: body.includeSensitiveData === true,
    description: body.description ?? "",
    throttlePerSecond: body.throttlePerSecond ?? null,
    headers: sealHeaders(secrets, body.headers),
    ed25519: keys,
  });
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 200, body: view(row, await tables.knownPatterns()) };
}

/** A new secret in the Standard Webhooks form: `whsec_` and the base64 of 32 random bytes. */
export function generatedSecret(): string {
  return `${WHSEC_PREFIX}${randomBytes(32).toString("base64")}`;
}

/**
 * Gives a subscription a new, generated secret, shown in this answer only. For the overlap (the query's
 * `overlapSeconds`, else `defaultOverlapSeconds`) deliveries are signed with both, so a receiver can take
 * the new one on at its own pace; then the old one is no longer used.
 */
export async function rotateSecret(
  tables: SubscriptionRepository,
  secrets: SecretBox,
  defaultOverlapSeconds: number,
  req: RequestOfRoute<Routes["webhooks.rotate-secret"]>,
): Promise<ReplyOfRoute<Routes["webhooks.rotate-secret"]>> {
  const within = reachWorkspace(req.principal);
  const secret = generatedSecret();
  const overlap = req.query.overlapSeconds ?? defaultOverlapSeconds;
  const row = await tables.rotate(req.params.id, within, secrets.seal(secret), overlap);
  if (row === null) throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return {
    status: 200,
    body: { ...view(row, await tables.knownPatterns()), secret },
    headers: { "cache-control": "no-store" },
  };
}

/** Drops rotated secrets whose overlap is over (no delivery reads them past that moment). */
export async function dropExpiredSecrets(db: Queries): Promise<void> {
  await db.query(sql`
    UPDATE webhook_dispatcher.subscriptions
    SET previous_secret_encrypted = NULL, previous_secret_expires_at = NULL
    WHERE previous_secret_expires_at <= now()`);
}

export async function deleteSubscription(
  tables: SubscriptionRepository,
  req: RequestOfRoute<Routes["webhooks.delete"]>,
): Promise<ReplyOfRoute<Routes["webhooks.delete"]>> {
  if (!(await tables.remove(req.params.id, reachWorkspace(req.principal))))
    throw new NotFoundError(`Subscription '${req.params.id}' was not found.`);
  return { status: 204 };
}

/**
 * The circuit of a subscription's receiver (its origin, within its workspace), by this replica's watched
 * copy of the shared state.
 */
export async function circuitOf(
  tables: SubscriptionRepository,
  breaker: Pick<CircuitBreaker, "stateOf">,
  threshold: number,
  req: RequestOfRoute<Routes["webhooks.circuit"]>,
): Promise<ReplyOfRoute<Routes["webhooks.circuit"]>> {
  const sub = await reachableSubscription(tables, req.params.id, req.principal);
  const origin = new URL(sub.target_url).origin;
  const circuit = breaker.stateOf(receiverKey(sub.workspace_key, origin));
  return {
    status: 200,
    body: {
      origin,
      state: circuit.state,
      consecutiveFailures: circuit.failures,
      openUntilUtc: circuit.openUntil === null ? null : new Date(circuit.openUntil).toISOString(),
      threshold,
    },
  };
}

export async function eventCatalog(
  tables: SubscriptionRepository,
): Promise<ReplyOfRoute<Routes["events.catalog"]>> {
  const rows = await tables.catalog();
  return {
    status: 200,
    body: rows.map((row) => {
      // The platform's own events: the schemas their publishers are typed by.
      const own = row.source === "host" ? platformEvents[row.eventName as PlatformEventName] : undefined;
      const schema = own?.data ?? (row.schema as Record<string, unknown> | null);
      const example = own === undefined ? row.example : own.example;
      return {
        eventName: row.eventName,
        source: row.source,
        description: row.description,
        schema: schema ?? null,
        ...(example === null || example === undefined ? {} : { example }),
      };
    }),
  };
}
