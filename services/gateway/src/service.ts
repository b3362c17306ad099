import { gatewayContract } from "@svc/contracts";
import { defineService } from "@svc/runtime";

import { buildGateway } from "./app.js";
import { gatewaySettings } from "./settings.js";

/** The gateway as it runs: the application of app.ts listening on GATEWAY_HOST:GATEWAY_PORT. */
export const gatewayService = defineService(gatewayContract, {
  settings: gatewaySettings,
  metricsOverHttp: true,
  // The principal of every operator request it forwards is signed with a key of this process, whose public
  // half is in the principal keys bucket: the owning service acts on nothing else.
  signsPrincipals: true,
  async start(deps) {
    const app = await buildGateway(deps);
    const address = await app.listen({ host: deps.config.gatewayHost, port: deps.config.gatewayPort });
    deps.log.info({ address }, "gateway listening");
    return {
      // It answers HTTP, not the bus: no route or message of its own.
      routes: {},
      messages: {},
      // Report not ready and keep serving while load balancers take the replica out, then stop accepting
      // connections and let in-flight requests finish before the bus drains.
      beforeDrain: async () => {
        app.beginDrain();
        const delay = deps.config.shutdownDrainDelayMs;
        if (delay > 0) {
          deps.log.info({ delayMs: delay }, "draining: /ready answers 503, still serving");
          await new Promise((r) => setTimeout(r, delay));
        }
        await app.close();
      },
      httpAddress: address,
    };
  },
});
