import { describe, expect, it } from "vitest";

import { hashPassword, passwords, verifyPassword } from "./passwords.js";

describe("password hashing", () => {
  it("hashes at the configured cost and verifies with the parameters the hash names", async () => {
    const cheap = passwords(10);
    const stored = await cheap.hash("correct horse battery");
    expect(stored).toMatch(/^scrypt\$1024\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(await verifyPassword("correct horse battery", stored)).toBe(true);
    expect(await verifyPassword("correct horse batter", stored)).toBe(false);
    // A hash made at another cost (before the setting changed) still verifies, at its own cost.
    const older = await hashPassword("correct horse battery", 11);
    expect(older).toMatch(/^scrypt\$2048\$/);
    expect(await verifyPassword("correct horse battery", older)).toBe(true);
    // The same password salted twice: two different hashes.
    expect(await cheap.hash("correct horse battery")).not.toBe(stored);
    // Only a hash at the configured parameters is current: sign-in renews the others.
    expect(cheap.current(stored)).toBe(true);
    expect(cheap.current(older)).toBe(false);
    expect(passwords(11).current(older)).toBe(true);
    expect(cheap.current("scrypt$1024$4$1$c2FsdA$aGFzaA")).toBe(false);
  });

  it("makes the decoy once, at the configured cost, and no guess matches it", async () => {
    const cheap = passwords(10);
    const decoy = await cheap.decoy();
    expect(await cheap.decoy()).toBe(decoy);
    expect(decoy).toMatch(/^scrypt\$1024\$/);
    expect(await verifyPassword("", decoy)).toBe(false);
  });

  it("refuses what is not one of its hashes", async () => {
    for (const stored of ["", "plain", "scrypt$1024$8$1$salt", "bcrypt$1024$8$1$c2FsdA$aGFzaA"])
      expect(await verifyPassword("plain", stored)).toBe(false);
  });
});
