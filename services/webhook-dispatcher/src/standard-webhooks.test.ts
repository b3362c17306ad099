/**
 * Our Standard Webhooks signatures against the scheme's official library (`standardwebhooks`), which is
 * what receivers verify with: a `whsec_` secret as the library expects it by default, any other secret in
 * its raw form, and a tampered body, id or timestamp refused.
 */
import { randomBytes } from "node:crypto";

import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";

import { secretViolations, standardSignature } from "./standard-webhooks.js";

const body = Buffer.from(JSON.stringify({ event: "user.created", data: { userName: "zoë" } }));
const id = "8f14e45f-ceea-4e7a-9a3b-1b2f6a6e2c11";

function headers(secret: string, at = Math.floor(Date.now() / 1000), signedBody = body) {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(at),
    "webhook-signature": standardSignature([secret], id, at, signedBody),
  };
}

describe("Standard Webhooks signatures", () => {
  it("verify with the official library: a whsec_ secret by default, any other secret as raw bytes", () => {
    const whsec = `whsec_${randomBytes(32).toString("base64")}`;
    expect(new Webhook(whsec).verify(body, headers(whsec))).toEqual(JSON.parse(body.toString()));
    const plain = "a shared secret";
    expect(new Webhook(Buffer.from(plain, "utf8"), { format: "raw" }).verify(body, headers(plain))).toEqual(
      JSON.parse(body.toString()),
    );
  });

  it("are refused for another body, id, timestamp or secret", () => {
    const whsec = `whsec_${randomBytes(24).toString("base64")}`;
    const hook = new Webhook(whsec);
    const tampered = Buffer.from(body.toString().replace("zoë", "eve"));
    expect(() => hook.verify(tampered, headers(whsec))).toThrow("No matching signature");
    expect(() => hook.verify(body, { ...headers(whsec), "webhook-id": "another" })).toThrow();
    const at = Math.floor(Date.now() / 1000);
    expect(() => hook.verify(body, { ...headers(whsec, at), "webhook-timestamp": String(at + 1) })).toThrow();
    const other = `whsec_${randomBytes(24).toString("base64")}`;
    expect(() => hook.verify(body, headers(other))).toThrow("No matching signature");
    // An old attempt's signature is refused by the library's tolerance, whatever the key.
    expect(() => hook.verify(body, headers(whsec, at - 600))).toThrow("too old");
  });

  it("sign with two secrets during a rotation: a receiver holding either verifies, a third is refused", () => {
    const [old, fresh, other] = [0, 1, 2].map(() => `whsec_${randomBytes(32).toString("base64")}`);
    const at = Math.floor(Date.now() / 1000);
    const both = {
      "webhook-id": id,
      "webhook-timestamp": String(at),
      "webhook-signature": standardSignature([fresh as string, old as string], id, at, body),
    };
    expect(both["webhook-signature"].split(" ")).toHaveLength(2);
    expect(both["webhook-signature"].split(" ")[0]).toBe(headers(fresh as string, at)["webhook-signature"]);
    expect(new Webhook(old as string).verify(body, both)).toEqual(JSON.parse(body.toString()));
    expect(new Webhook(fresh as string).verify(body, both)).toEqual(JSON.parse(body.toString()));
    expect(() => new Webhook(other as string).verify(body, both)).toThrow("No matching signature");
  });

  it("key a secret that only looks like whsec_ by its text, never by the few bytes its base64 gives", () => {
    const odd = "whsec_!!";
    const hook = new Webhook(Buffer.from(odd, "utf8"), { format: "raw" });
    expect(hook.verify(body, headers(odd))).toEqual(JSON.parse(body.toString()));
  });

  it("accept a whsec_ secret only as the padded base64 of 24 to 64 bytes", () => {
    expect(secretViolations("any text at all")).toEqual([]);
    expect(secretViolations(`whsec_${randomBytes(24).toString("base64")}`)).toEqual([]);
    expect(secretViolations(`whsec_${randomBytes(64).toString("base64")}`)).toEqual([]);
    for (const bad of [
      `whsec_${randomBytes(16).toString("base64")}`,
      `whsec_${randomBytes(65).toString("base64")}`,
      `whsec_${randomBytes(32).toString("base64url")}`,
      "whsec_not base64 at all!",
      "whsec_",
    ]) {
      expect(secretViolations(bad), bad).toMatchObject([{ field: "/body/secret" }]);
    }
  });
});
