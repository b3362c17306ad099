/** What the configuration routes show of an address setting: never the credentials in it. */
import { describe, expect, it } from "vitest";

import { withoutCredentials } from "./live-settings.js";

describe("withoutCredentials", () => {
  it("hides the user and password of each address, keeps the rest as it is", () => {
    expect(withoutCredentials("nats://svc:s3cret@nats-0:4222,nats://nats-1:4222")).toBe(
      "nats://***:***@nats-0:4222,nats://nats-1:4222",
    );
    expect(withoutCredentials("https://token@collector.example/v1/traces")).toBe(
      "https://***@collector.example/v1/traces",
    );
    expect(withoutCredentials("http://127.0.0.1:4318")).toBe("http://127.0.0.1:4318");
    expect(withoutCredentials("info")).toBe("info");
  });
});
