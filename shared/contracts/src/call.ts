/**
 * A route's or a message's handler run as the service runs it, without NATS: the request checked against
 * the contract's schemas (and, for a route, its guard: key, platform scope, reach), the reply against its
 * schema. For a service's unit tests, with in-memory fakes of its own repositories.
 */
import { authorise } from "@svc/access";
import type { HandlerContext, Principal } from "@svc/bus";
import { SvcError } from "@svc/errors";
import { createLogger } from "@svc/observability";

import type { MessageContract, MessageHandler, ReplyOfMessage, RequestOfMessage } from "./messages.js";
import type { ReplyOfRoute, RequestOfRoute, RouteContract, RouteSpec } from "./route.js";
import type { RouteHandler } from "./serve.js";

/**
 * A caller for a handler's test: a platform operator (`op`) holding `permissions`, with `more` over it (a
 * workspace session: `{ scope: "workspace", workspaceKey }`).
 */
export function caller(permissions: readonly string[], more: Partial<Principal> = {}): Principal {
  return { subject: "op", scope: "platform", workspaceKey: null, permissions, roles: ["operator"], ...more };
}

/** As the bus hands it over: the request's wire form (dates as text, undefined members gone). */
const overTheWire = (value: unknown): unknown => JSON.parse(JSON.stringify(value)) as unknown;

function contextFor(subject: string): HandlerContext {
  return {
    subject,
    requestId: undefined,
    header: () => undefined,
    deadline: Date.now() + 30_000,
    log: createLogger("unit", "silent"),
  };
}

export async function callRoute<S extends RouteSpec, Subject extends string>(
  route: RouteContract<S, Subject>,
  handler: RouteHandler<NoInfer<S>>,
  request: RequestOfRoute<NoInfer<S>>,
): Promise<ReplyOfRoute<S>> {
  const decoded = route.decode(overTheWire(request));
  authorise(decoded.principal, route, decoded.params, decoded.query);
  const reply = await handler(decoded, contextFor(route.subject));
  route.checkReply(reply);
  return reply;
}

export async function callMessage<S extends MessageContract>(
  message: S,
  handler: MessageHandler<NoInfer<S>>,
  request: RequestOfMessage<NoInfer<S>>,
): Promise<ReplyOfMessage<S>> {
  const decoded = message.decode(overTheWire(request));
  const reply = await handler(decoded as RequestOfMessage<S>, contextFor(message.subject));
  message.checkReply(reply);
  return reply;
}

/** The SvcError a refused call threw; throws when the call succeeded or failed with anything else. */
export async function refusalOf(call: Promise<unknown>): Promise<SvcError> {
  const outcome = await call.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (outcome instanceof SvcError) return outcome;
  throw new Error(
    outcome === undefined
      ? "the call was not refused"
      : `the call failed, but not with a refusal: ${outcome instanceof Error ? outcome.message : "a thrown value"}`,
  );
}
