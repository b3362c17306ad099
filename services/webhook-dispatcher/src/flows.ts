/**
 * Flow management: `GET`/`POST /api/flows`, `PUT`/`DELETE /api/flows/{id}`. A flow is a
 * trigger (an event name pattern, matched like a webhook subscription's, in its workspace or, without
 * one, in every workspace) and a list of actions; the matcher queues one `flow.run` job per matching
 * event (flow-run.ts runs it). An http action's secret is sealed at rest and never shown again.
 */
import { randomUUID } from "node:crypto";

import type { Static } from "@sinclair/typebox";
import { listWorkspace } from "@svc/access";
import type { FlowAction, ReplyOfRoute, RequestOfRoute, webhookRoutes } from "@svc/contracts";
import { type Db, type Listing, readPage, sql, toPage } from "@svc/db";
import { ErrorCode, NotFoundError, SvcError, ValidationError, type Violation } from "@svc/errors";

import type { TargetPolicy } from "./http-client.js";
import type { PluginEventScopes } from "./plugin-contributions.js";
import { newestFirst } from "./scoped-tables.js";
import type { SecretBox } from "./secrets.js";
import { knownPatterns, reach, targetUrlViolations } from "./subscriptions.js";

type Routes = typeof webhookRoutes;
type ActionInput = Static<typeof FlowAction>;
const FLOWS: Listing = { tag: "flows", kinds: ["timestamp", "uuid"] };

/** An action as stored: an http action's secret sealed under `secretEncrypted`. */
export type StoredAction =
  | { type: "http"; url: string; secretEncrypted?: string; includeSensitiveData?: boolean }
  | { type: "publish"; eventName: string; data?: Record<string, unknown> }
  | { type: "notify"; title: string; detail?: string; permission?: string };

interface Row {
  id: string;
  name: string;
  workspace_key: string | null;
  event_name: string;
  actions: StoredAction[];
  is_active: boolean;
  created_at: Date;
  updated_at: Date;
}

const FLOWS_TABLE = sql`webhook_dispatcher.flows`;
const COLUMNS = sql`id, name, workspace_key, event_name, actions, is_active, created_at, updated_at`;
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
  db: Db,
  secrets: SecretBox,
  allowed: TargetPolicy,
  scopes: PluginEventScopes,
  maxPerWorkspace: number,
  req: RequestOfRoute<Routes["flows.create"]>,
): Promise<ReplyOfRoute<Routes["flows.create"]>> {
  const body = req.body;
  const workspaceKey = listWorkspace(req.principal, body.workspaceKey ?? undefined) ?? null;
  const actions = storeActions(body.actions, secrets, allowed, (name) => scopes.mayRaise(name, workspaceKey));
  const row = await db.transaction(async (tx) => {
    // Flows cannot amplify: a workspace has at most `maxPerWorkspace` flows. The lock
    // makes the count and the insert one step for concurrent creates in the same workspace.
    await tx.query(sql`SELECT pg_advisory_xact_lock(hashtext(${`flows:${workspaceKey ?? ""}`}))`);
    const { n } = await tx.one<{ n: number }>(sql`
      SELECT count(*)::int AS n FROM webhook_dispatcher.flows
      WHERE workspace_key IS NOT DISTINCT FROM ${workspaceKey}`);
    if (n >= maxPerWorkspace) {
      throw new SvcError(
        ErrorCode.Conflict,
        `${workspaceKey === null ? "The platform has" : `Workspace '${workspaceKey}' has`} ${n} flows, the most allowed: delete one first.`,
        { extensions: { limit: maxPerWorkspace, rule: "flows-per-workspace" } },
      );
    }
    return tx.one<Row>(sql`
      INSERT INTO webhook_dispatcher.flows (id, name, workspace_key, event_name, actions, is_active)
      VALUES (${randomUUID()}, ${body.name}, ${workspaceKey}, ${body.eventName},
              ${JSON.stringify(actions)}::jsonb, ${body.isActive !== false})
      RETURNING ${COLUMNS}`);
  });
  return {
    status: 201,
    body: view(row, await knownPatterns(db)),
    headers: { location: `/api/flows/${row.id}` },
  };
}

export async function replaceFlow(
  db: Db,
  secrets: SecretBox,
  allowed: TargetPolicy,
  scopes: PluginEventScopes,
  req: RequestOfRoute<Routes["flows.put"]>,
): Promise<ReplyOfRoute<Routes["flows.put"]>> {
  const body = req.body;
  const row = await db.transaction(async (tx) => {
    const current = await tx.maybeOne<Row>(sql`
      SELECT ${COLUMNS} FROM webhook_dispatcher.flows
      WHERE id = ${req.params.id} AND ${reach(req.principal)} FOR UPDATE`);
    if (current === null) throw new NotFoundError(`Flow '${req.params.id}' was not found.`);
    // A workspace session's flow stays in its workspace; a platform session may move it.
    const workspaceKey =
      body.workspaceKey === undefined
        ? current.workspace_key
        : (listWorkspace(req.principal, body.workspaceKey ?? undefined) ?? null);
    const actions = storeActions(
      body.actions,
      secrets,
      allowed,
      (name) => scopes.mayRaise(name, workspaceKey),
      current.actions,
    );
    return tx.one<Row>(sql`
      UPDATE webhook_dispatcher.flows
      SET name = ${body.name}, workspace_key = ${workspaceKey}, event_name = ${body.eventName},
          actions = ${JSON.stringify(actions)}::jsonb, is_active = ${body.isActive ?? current.is_active},
          updated_at = now()
      WHERE id = ${req.params.id}
      RETURNING ${COLUMNS}`);
  });
  return { status: 200, body: view(row, await knownPatterns(db)) };
}

export async function deleteFlow(
  db: Db,
  req: RequestOfRoute<Routes["flows.delete"]>,
): Promise<ReplyOfRoute<Routes["flows.delete"]>> {
  const row = await db.maybeOne(sql`
    DELETE FROM webhook_dispatcher.flows WHERE id = ${req.params.id} AND ${reach(req.principal)} RETURNING id`);
  if (row === null) throw new NotFoundError(`Flow '${req.params.id}' was not found.`);
  return { status: 204 };
}

/** Paged newest first by (created_at, id). */
export async function listFlows(
  db: Db,
  req: RequestOfRoute<Routes["flows.list"]>,
): Promise<ReplyOfRoute<Routes["flows.list"]>> {
  const page = readPage(req.query, FLOWS);
  const workspaceKey = listWorkspace(req.principal, req.query.workspaceKey) ?? null;
  const rows = await newestFirst<Row>(db, FLOWS_TABLE, COLUMNS, workspaceKey, page);
  const known = await knownPatterns(db);
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
