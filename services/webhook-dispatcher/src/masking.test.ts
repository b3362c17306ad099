import { describe, expect, it } from "vitest";

import { maskPayload, maskValue } from "./masking.js";

const sensitive = new Set(["email", "displayName", "phoneNumber"]);

describe("maskValue", () => {
  it("keeps 3 leading and 2 trailing characters of values over 5 characters", () => {
    expect(maskValue("alice@example.com")).toBe("ali***om");
    expect(maskValue("123456")).toBe("123***56");
  });
  it("masks values of 5 characters or fewer entirely", () => {
    expect(maskValue("12345")).toBe("***");
    expect(maskValue("")).toBe("***");
  });
});

describe("maskPayload", () => {
  it("walks objects and arrays at any depth and leaves other fields alone", () => {
    const payload = {
      email: "alice@example.com",
      id: 7,
      call: { parties: [{ phoneNumber: "+4930123456", role: "caller" }, { displayName: "Bob" }] },
    };
    expect(maskPayload(payload, sensitive)).toEqual({
      email: "ali***om",
      id: 7,
      call: { parties: [{ phoneNumber: "+49***56", role: "caller" }, { displayName: "***" }] },
    });
    // The input is not modified.
    expect(payload.email).toBe("alice@example.com");
  });
});

describe("maskPayload and the case of names", () => {
  it("masks `Email`, `EMAIL` and `DisplayName` as it masks `email` and `displayName`", () => {
    expect(
      maskPayload(
        { Email: "alice@example.com", EMAIL: "bob@example.com", nested: { DISPLAYNAME: "Carol Smith" } },
        sensitive,
      ),
    ).toEqual({ Email: "ali***om", EMAIL: "bob***om", nested: { DISPLAYNAME: "Car***th" } });
  });
});
