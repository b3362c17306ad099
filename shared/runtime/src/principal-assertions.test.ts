import type { NatsConnection } from "@nats-io/transport-node";
import type { Principal } from "@svc/bus";
import { decodeJwt } from "jose";
import { describe, expect, it } from "vitest";

import { GatewayPrincipalSigner } from "./principal-assertions.js";

// sign() touches no NATS: only publish() does, and these tests do not publish.
const signer = () => new GatewayPrincipalSigner(undefined as unknown as NatsConnection, "unit", 1);

const principalOf = (permissions: string[]) => ({
  subject: "u-1",
  scope: "platform" as const,
  workspaceKey: null,
  permissions,
  roles: ["admin"],
});

describe("the gateway's principal assertions", () => {
  it("signs what the principal says, and the same assertion again for the same principal", async () => {
    const s = signer();
    const frozen: Principal = Object.freeze({
      ...principalOf(["users.read"]),
      permissions: Object.freeze(["users.read"]),
      roles: Object.freeze(["admin"]),
    });
    const first = await s.sign(frozen);
    expect(decodeJwt(first).principal).toEqual(principalOf(["users.read"]));
    expect(await s.sign(frozen)).toBe(first);
    // An equal principal in another object gets the same assertion (found by its canonical form).
    expect(await s.sign(principalOf(["users.read"]))).toBe(first);
  });

  it("never answers a changed principal with the assertion of what it was", async () => {
    const s = signer();
    const mutable = principalOf(["users.read"]);
    const before = await s.sign(mutable);
    mutable.permissions.push("users.write");
    const after = await s.sign(mutable);
    expect(after).not.toBe(before);
    expect((decodeJwt(after).principal as Principal).permissions).toEqual(["users.read", "users.write"]);
    // A principal frozen only on the outside is looked up by content, not kept by object.
    const shallow = Object.freeze(principalOf(["users.read"]));
    await s.sign(shallow);
    shallow.permissions.push("roles.write");
    expect((decodeJwt(await s.sign(shallow)).principal as Principal).permissions).toContain("roles.write");
  });
});
