/**
 * What travels on the bus: the typed subject map (filled by the code that owns each subject), and the
 * envelope of operator routes (the caller's principal, the route's input, the reply). Subjects are written
 * without the deployment prefix (`svc` by default); the Bus adds it. A wrong payload is a compile error on
 * both sides.
 */

/** Session scope (spec 5.2). */
export const Scope = { Platform: "platform", Workspace: "workspace" } as const;
export type Scope = (typeof Scope)[keyof typeof Scope];

/**
 * Who is calling, as the gateway established it; travels with every operator request so that the owning
 * service applies the caller's reach (scope and workspace) to what it returns.
 */
export interface Principal {
  readonly subject: string;
  /** null: no scope claim, which never grants platform reach (spec 5.2.4). */
  readonly scope: Scope | null;
  readonly workspaceKey: string | null;
  readonly permissions: readonly string[];
  readonly roles: readonly string[];
}

/**
 * What the gateway sends a service for an operator route: the authenticated principal and the validated
 * route parameters, query and body. The route's contract (@svc/contracts) gives their shapes.
 */
export interface RouteRequest<P = Record<string, string>, Q = Record<string, unknown>, B = unknown> {
  readonly principal: Principal;
  readonly params: P;
  readonly query: Q;
  readonly body: B;
}

/** A service's answer to an operator route; errors travel as SvcErrors instead. */
export interface RouteReply<T = unknown> {
  readonly status: number;
  readonly body?: T;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * The typed map of request/reply subjects outside the operator routes. The bus declares none itself: the
 * code that owns a subject adds it by module augmentation (the runtime its ping and metrics.collect,
 * @svc/contracts rbac's sign-in and keys and the resolver's resolution), so the transport knows no
 * service's data types:
 *
 *     declare module "@svc/bus" {
 *       interface SubjectMap { "resolver.workspace.resolve": { request: ResolveRequest; reply: ResolveResult } }
 *     }
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by module augmentation
export interface SubjectMap {}
export type Subject = keyof SubjectMap;
export type RequestOf<S extends Subject> = SubjectMap[S] extends { request: infer R } ? R : never;
export type ReplyOf<S extends Subject> = SubjectMap[S] extends { reply: infer R } ? R : never;

/** Fan-out notifications (core NATS publish, every subscriber gets each one, nothing durable); augmented. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by module augmentation
export interface BroadcastMap {}
export type Broadcast = keyof BroadcastMap;

/** The service that owns a subject: its first token. */
export function ownerOf(subject: string): string {
  const dot = subject.indexOf(".");
  return dot === -1 ? subject : subject.slice(0, dot);
}
