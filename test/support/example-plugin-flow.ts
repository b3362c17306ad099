import { expect } from "vitest";

import { examplePackage } from "../../scripts/lib/example-plugin.js";
import { bearerApi, installPackage } from "./http.js";
import { eventually } from "./wait.js";

/**
 * Installs and activates the example plugin through the gateway and waits until its route answers from
 * the plugin's own process (a flow many stack tests run: it crosses the gateway, the registry, the object
 * store and the plugin process's own NATS connection).
 */
export async function installAndGreet(base: string, token: string): Promise<void> {
  const api = bearerApi(() => base);
  const installed = await installPackage(base, token, await examplePackage());
  expect(installed.status, installed.text).toBe(201);
  const activated = await api("POST", "/api/plugins/hello/activate", token);
  expect(activated.status, activated.text).toBe(200);
  const greeted = await eventually(
    () => api("GET", "/api/plugins/hello/greeting", token),
    (r) => r.status === 200,
    15_000,
  );
  expect(greeted.status, greeted.text).toBe(200);
}
