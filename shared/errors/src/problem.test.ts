import { describe, expect, it } from "vitest";

import { ErrorCode } from "./codes.js";
import { ForbiddenError, NotFoundError, ValidationError } from "./errors.js";
import { fromWire, toProblem } from "./problem.js";

describe("toProblem", () => {
  it("builds the 403 document naming the missing permission", () => {
    expect(toProblem(new ForbiddenError("tenant.read"), "https://x.test/problems/")).toEqual({
      type: "https://x.test/problems/forbidden",
      title: "Forbidden",
      status: 403,
      detail: "The permission 'tenant.read' is required.",
      code: ErrorCode.Forbidden,
      missingPermission: "tenant.read",
    });
  });

  it("lists validation violations", () => {
    const problem = toProblem(
      new ValidationError([{ field: "/body/eventName", message: "is required" }]),
      "/p",
    );
    expect(problem).toMatchObject({
      status: 400,
      errors: [{ field: "/body/eventName", message: "is required" }],
    });
  });

  it("hides the message of an unexpected error", () => {
    const problem = toProblem(new Error("connection string postgres://u:secret@h"), "/p");
    expect(problem).toMatchObject({
      status: 500,
      code: ErrorCode.Internal,
      detail: "An unexpected error occurred.",
    });
    expect(JSON.stringify(problem)).not.toContain("secret");
  });
});

describe("fromWire", () => {
  it("rebuilds the same error from code and body", () => {
    const original = new NotFoundError("gone");
    const rebuilt = fromWire(original.code, { detail: "gone", extra: 1 });
    expect(rebuilt).toMatchObject({
      code: ErrorCode.NotFound,
      message: "gone",
      status: 404,
      extensions: { extra: 1 },
    });
  });

  it("treats an unknown code as internal", () => {
    expect(fromWire("SVC_NOPE", {})).toMatchObject({ code: ErrorCode.Internal, status: 500 });
  });
});
