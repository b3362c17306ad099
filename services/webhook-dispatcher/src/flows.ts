/**
 * Flow management: `GET`/`POST /api/flows`, `PUT`/`DELETE /api/flows/{id}`. A flow is a
 * trigger (an event name pattern, matched like a webhook subscription's, in its workspace or, without
 * one, in every workspace) and a list of actions; the matcher queues one `flow.run` job per matching
 * event (flow-run.ts runs it). An http action's secret is sealed at rest and never shown again.
 */
import { randomUUID } from "node:crypto";

import type { Static } from "@sinclair/typebox";
import { listWorkspace, reachWorkspace } from "@svc/access";
import type { FlowAction, ReplyOfRoute, RequestOfRoute, webhookRoutes } from "@svc/contracts";
import { type Db, type Listing, readPage, sql, toPage } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError, type Violation } from "@svc/errors";

import type { TargetPolicy } from "./http-client.js";
import type { PluginEventScopes } from "./plugin-contributions.js";
import { inWorkspace, newestFirst } from "./scoped-tables.js";
import type { SecretBox } from "./secrets.js";
import { knownPatterns, targetUrlViolations } from "./subscriptions.js";

type Routes = typeof webhookRoutes;
type ActionInput = Static<typeof FlowAction>;
const FLOWS: Listing = { tag: "flows", kinds: ["timestamp", "uuid"] };

/** An action as stored: an http action's secret sealed under `secretEncrypted`. */
export type StoredAction =
  | { type: "http"; url: string; secretEncrypted?: string; includeSensitiveData?: boolean }
  | { type: "publish"; eventName: string; data?: Record<string, unknown> }
  | { type: "notify"; title: string; detail?: string; permission?: string };

/** A flow as its table holds it. */
export interface FlowRow {
  id: string;
  name: string;
  workspace_key: string | null;
  event_name: string;
  actions: StoredAction[];
  is_active: boolean;
  created_at: Date;
  updated_at: Date;
}
type Row = FlowRow;

/** What a flow is made of, on creation or replacing one. */
export interface NewFlow {
  readonly name: string;
  readonly workspaceKey: string | null;
  readonly eventName: string;
  readonly actions: readonly StoredAction[];
  readonly isActive: boolean;
}

/**
 * What the flow routes ask of their table (the rules, reach above all, stay in the handlers): `within` is
 * the one workspace a change may touch, null for any.
 */
export interface FlowRepository {
  /**
   * Adds the flow unless its workspace (null: the platform's own) already has `max` flows: then how many
   * it has. Counting and adding are one step for creates racing in the same workspace.
   */
  insert(flow: NewFlow, max: number): Promise<{ row: Row } | { count: number }>;
  /**
   * Replaces the flow with what `change` makes of the one stored, in one step with reading it (a change
   * made meanwhile is not lost); null when there is no such flow. Nothing is written when `change` throws.
   */
  update(id: string, within: string | null, change: (current: Row) => NewFlow): Promise<Row | null>;
  remove(id: string, within: string | null): Promise<boolean>;
  /** Newest first by (created_at, id), after the page's cursor, one more than the limit. */
  page(
    workspaceKey: string | null,
    page: ReturnType<typeof readPage>,
  ): Promise<Array<Row & { created_at_us: string }>>;
  /** The patterns that match some event of the catalogue (`matchesKnownEvent`). */
  knownPatterns(): Promise<ReadonlySet<string>>;
}

const FLOWS_TABLE = sql`webhook_dispatcher.flows`;
const COLUMNS = sql`id, name, workspace_key, event_name, actions, is_active, created_at, updated_at`;

/** The flow table in PostgreSQL. */
export function flowTables(db: Db): FlowRepository {
  return {
    insert: (f, max) =>
      db.transaction(async (tx) => {
        // The lock makes the count and the insert one step for concurrent creates in one workspace.
        await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`flows:${f.workspaceKey ?? ""}`}))`);
        const { n } = await tx.one<{ n: number }>(sql`
          SELECT count(*)::int AS n FROM webhook_dispatcher.flows
          WHERE workspace_key IS NOT DISTINCT FROM ${f.workspaceKey}`);
        if (n >= max) return { count: n };
        const row = await tx.one<Row>(sql`
          INSERT INTO webhook_dispatcher.flows (id, name, workspace_key, event_name, actions, is_active)
          VALUES (${randomUUID()}, ${f.name}, ${f.workspaceKey}, ${f.eventName},
                  ${JSON.stringify(f.actions)}::jsonb, ${f.isActive})
          RETURNING ${COLUMNS}`);
        return { row };
      }),
    update: (id, within, change) =>
      db.transaction(async (tx) => {
        const current = await tx.maybeOne<Row>(sql`
          SELECT ${COLUMNS} FROM webhook_dispatcher.flows
          WHERE id = ${id} AND ${inWorkspace(within)} FOR UPDATE`);
        if (current === null) return null;
        const f = change(current);
        return tx.one<Row>(sql`
          UPDATE webhook_dispatcher.flows
          SET name = ${f.name}, workspace_key = ${f.workspaceKey}, event_name = ${f.eventName},
              actions = ${JSON.stringify(f.actions)}::jsonb, is_active = ${f.isActive}, updated_at = now()
          WHERE id = ${id}
          RETURNING ${COLUMNS}`);
      }),
    remove: async (id, within) =>
      (await db.maybeOne(sql`
        DELETE FROM webhook_dispatcher.flows WHERE id = ${id} AND ${inWorkspace(within)} RETURNING id`)) !==
      null,
    page: (workspaceKey, page) => newestFirst<Row>(db, FLOWS_TABLE, COLUMNS, workspaceKey, page),
    knownPatterns: () => knownPatterns(db),
  };
}

/** The default audience of a notify action: whoever may manage flows. */
export const DEFAULT_NOTIFY_PERMISSION = "flow.manage";

function actionView(a: StoredAction) {
  switch (a.type) {
    case "http":
      return {
        type: a.type,
        url: a.url,
        hasSecret: a.secretEncrypted !== undefined,
        includeSensitiveData: a.includeSensitiveData === true,
      };
    case "publish":
      return { type: a.type, eventName: a.eventName, data: a.data ?? null };
    case "notify":
      return {
        type: a.type,
        title: a.title,
        detail: a.detail ?? null,
        permission: a.permission ?? DEFAULT_NOTIFY_PERMISSION,
      };
  }
}

function view(row: Row, known: ReadonlySet<string>) {
  return {
    id: row.id,
    name: row.name,
    workspaceKey: row.workspace_key,
    eventName: row.event_name,
    actions: row.actions.map(actionView),
    isActive: row.is_active,
    createdAtUtc: row.created_at.toISOString(),
    updatedAtUtc: row.updated_at.toISOString(),
    matchesKnownEvent: known.has(row.event_name),
  };
}

/**
 * Checks what the schema cannot (an http action's URL against the outbound policy) and seals secrets; on
 * an update, an http action without a secret keeps the secret of the stored action with the same URL.
 */
function storeActions(
  actions: readonly ActionInput[],
  secrets: SecretBox,
  allowed: TargetPolicy,
  mayRaise: (eventName: string) => boolean,
  previous: readonly StoredAction[] = [],
): StoredAction[] {
  const violations: Violation[] = [];
  const stored = actions.map((a, i): StoredAction => {
    // Only the known properties are kept (the action schemas are open; see FlowAction).
    if (a.type === "publish") {
      if (!mayPublish(a.eventName, mayRaise)) {
        violations.push({
          field: `/body/actions/${i}/eventName`,
          message: `a flow publishes names under '${FLOW_EVENT_PREFIX}', or events of plugins in its workspace's chain; never the platform's ('${a.eventName}')`,
        });
      }
      return { type: a.type, eventName: a.eventName, ...(a.data === undefined ? {} : { data: a.data }) };
    }
    if (a.type === "notify") {
      return {
        type: a.type,
        title: a.title,
        ...(a.detail === undefined ? {} : { detail: a.detail }),
        ...(a.permission === undefined ? {} : { permission: a.permission }),
      };
    }
    for (const v of targetUrlViolations(a.url, allowed)) {
      violations.push({ field: `/body/actions/${i}/url`, message: v.message });
    }
    const kept = previous.find(
      (p): p is Extract<StoredAction, { type: "http" }> => p.type === "http" && p.url === a.url,
    )?.secretEncrypted;
    const secretEncrypted = a.secret !== undefined ? secrets.seal(a.secret) : kept;
    return {
      type: "http",
      url: a.url,
      ...(secretEncrypted === undefined ? {} : { secretEncrypted }),
      ...(a.includeSensitiveData === true ? { includeSensitiveData: true } : {}),
    };
  });
  if (violations.length > 0) throw new ValidationError(violations);
  return stored;
}

/** The namespace of the events flows raise themselves. */
export const FLOW_EVENT_PREFIX = "flow.";

/**
 * What a flow may publish: its own names, `flow.<name>`, or the declared events of a
 * plugin its workspace may raise (`mayRaise`: the plugin is in the workspace's chain and entitled; for a
 * platform flow, installed); never a core event of the platform (`user.deleted`, `plugin.refused`, …),
 * which only the services that own them raise.
 */
export function mayPublish(eventName: string, mayRaise: (eventName: string) => boolean): boolean {
  return (
    (eventName.startsWith(FLOW_EVENT_PREFIX) && eventName.length > FLOW_EVENT_PREFIX.length) ||
    mayRaise(eventName)
  );
}

export async function createFlow(
  tables: FlowRepository,
  secrets: SecretBox,
  allowed: TargetPolicy,
  scopes: PluginEventScopes,
  maxPerWorkspace: number,
  req: RequestOfRoute<Routes["flows.create"]>,
): Promise<ReplyOfRoute<Routes["flows.create"]>> {
  const body = req.body;
  const workspaceKey = listWorkspace(req.principal, body.workspaceKey ?? undefined) ?? null;
  const actions = storeActions(body.actions, secrets, allowed, (name) => scopes.mayRaise(name, workspaceKey));
  // Flows cannot amplify: a workspace has at most `maxPerWorkspace` flows.
  const added = await tables.insert(
    { name: body.name, workspaceKey, eventName: body.eventName, actions, isActive: body.isActive !== false },
    maxPerWorkspace,
  );
  if ("count" in added) {
    throw new SvcError(
      ErrorCode.Conflict,
      `${workspaceKey === null ? "The platform has" : `Workspace '${workspaceKey}' has`} ${added.count} flows, the most allowed: delete one first.`,
      { extensions: { limit: maxPerWorkspace, rule: "flows-per-workspace" } },
    );
  }
  return {
    status: 201,
    body: view(added.row, await tables.knownPatterns()),
    headers: { location: `/api/flows/${added.row.id}` },
  };
}

export async function replaceFlow(
  tables: FlowRepository,
  secrets: SecretBox,
  allowed: TargetPolicy,
  scopes: PluginEventScopes,
  req: RequestOfRoute<Routes["flows.put"]>,
): Promise<ReplyOfRoute<Routes["flows.put"]>> {
  const body = req.body;
  const row = await tables.update(req.params.id, reachWorkspace(req.principal), (current) => {
    // A workspace session's flow stays in its workspace; a platform session may move it.
    const workspaceKey =
      body.workspaceKey === undefined
        ? current.workspace_key
        : (listWorkspace(req.principal, body.workspaceKey ?? undefined) ?? null);
    return {
      name: body.name,
      workspaceKey,
      eventName: body.eventName,
      actions: storeActions(
        body.actions,
        secrets,
        allowed,
        (name) => scopes.mayRaise(name, workspaceKey),
        current.actions,
      ),
      isActive: body.isActive ?? current.is_active,
    };
  });
  if (row === null) throw new NotFoundError(`Flow '${req.params.id}' was not found.`);
  return { status: 200, body: view(row, await tables.knownPatterns()) };
}

export async function deleteFlow(
  tables: FlowRepository,
  req: RequestOfRoute<Routes["flows.delete"]>,
): Promise<ReplyOfRoute<Routes["flows.delete"]>> {
  if (!(await tables.remove(req.params.id, reachWorkspace(req.principal)))) {
    throw new NotFoundError(`Flow '${req.params.id}' was not found.`);
  }
  return { status: 204 };
}

/** Paged newest first by (created_at, id). */
export async function listFlows(
  tables: FlowRepository,
  req: RequestOfRoute<Routes["flows.list"]>,
): Promise<ReplyOfRoute<Routes["flows.list"]>> {
  const page = readPage(req.query, FLOWS);
  const workspaceKey = listWorkspace(req.principal, req.query.workspaceKey) ?? null;
  const rows = await tables.page(workspaceKey, page);
  const known = await tables.knownPatterns();
  return {
    status: 200,
    body: toPage(
      rows,
      page.limit,
      FLOWS,
      (last) => [last.created_at_us, last.id],
      (r) => view(r, known),
    ),
  };
}

export interface MatchedFlow {
  readonly id: string;
  readonly actions: StoredAction[];
}
