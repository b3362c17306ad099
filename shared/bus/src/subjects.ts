/**
 * What travels on the bus: the typed subject map, filled by the code that owns each subject (the envelope
 * of operator routes is the wire contract's, which the index re-exports). Subjects are written without the
 * deployment prefix (`svc` by default); the Bus adds it. A wrong payload is a compile error on both sides.
 */

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
