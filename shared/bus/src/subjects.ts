/**
 * Subjects are written without the deployment prefix (`svc` by default); the Bus adds it. The bus knows no
 * subject and no payload type: @svc/contracts declares each one (routes, messages, broadcasts) with its
 * schemas, and serves and calls it through the bus.
 */

/** The service that owns a subject: its first token. */
export function ownerOf(subject: string): string {
  const dot = subject.indexOf(".");
  return dot === -1 ? subject : subject.slice(0, dot);
}
