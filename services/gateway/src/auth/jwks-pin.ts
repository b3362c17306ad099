/**
 * The gateway's key set, pinned across replies: a key id the gateway has seen keeps its
 * key material for the life of the process. A reply that maps a known key id to other material (a spoofed
 * `rbac.keys.jwks` answer on a bus without permissions) does not replace it; the conflict is reported. New
 * key ids are taken (rbac's key rotation) and ids rbac no longer lists are dropped.
 */
import type { JSONWebKeySet } from "jose";

export class PinnedKeys {
  private readonly known = new Map<string, string>();

  /** The key set to use after a reply: the reply's keys, with known ids kept as first seen. */
  accept(reply: JSONWebKeySet): { keys: JSONWebKeySet; conflicts: string[] } {
    const conflicts: string[] = [];
    const keys = reply.keys.map((key) => {
      const kid = key.kid;
      if (kid === undefined) return key;
      const material = JSON.stringify(key);
      const first = this.known.get(kid);
      if (first === undefined) {
        this.known.set(kid, material);
        return key;
      }
      if (first !== material) {
        conflicts.push(kid);
        return JSON.parse(first) as typeof key;
      }
      return key;
    });
    return { keys: { keys }, conflicts };
  }
}
