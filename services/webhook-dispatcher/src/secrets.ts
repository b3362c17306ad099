import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

import { growingLru } from "@svc/runtime";

/**
 * Webhook secrets at rest: AES-256-GCM with BackendHost__SecretsEncryptionKey; `iv.tag.ciphertext`.
 * What `open` decrypted is kept by its sealed text (the most recent 1,000): every delivery opens its
 * subscription's secret, and a sealed text always opens to the same secret (a new secret is sealed anew).
 */
export function createSecretBox(base64Key: string) {
  const key = Buffer.from(base64Key, "base64");
  const opened = growingLru<string, string>(1_000);
  const decrypt = (sealed: string): string => {
    const [iv, tag, data] = sealed.split(".").map((p) => Buffer.from(p, "base64url"));
    if (!iv || !tag || !data) throw new Error("malformed sealed secret");
    const decipher = createDecipheriv("aes-256-gcm", key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(data), decipher.final()]).toString("utf8");
  };
  return {
    seal(plain: string): string {
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
      return [iv, cipher.getAuthTag(), data].map((b) => b.toString("base64url")).join(".");
    },
    open(sealed: string): string {
      let plain = opened.get(sealed);
      if (plain === undefined) {
        plain = decrypt(sealed);
        opened.set(sealed, plain);
      }
      return plain;
    },
  };
}
export type SecretBox = ReturnType<typeof createSecretBox>;
