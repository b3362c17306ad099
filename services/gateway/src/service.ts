import { ServiceName } from "@svc/bus";
import type { ServiceDefinition } from "@svc/runtime";

import { buildGateway } from "./app.js";

/** The gateway as it runs: the application of app.ts listening on GATEWAY_HOST:GATEWAY_PORT. */
export const gatewayService: ServiceDefinition = {
  name: ServiceName.Gateway,
  async start(deps) {
    const app = await buildGateway(deps);
    const address = await app.listen({ host: deps.config.gatewayHost, port: deps.config.gatewayPort });
    deps.log.info({ address }, "gateway listening");
    return {
      // Stop accepting connections and let in-flight requests finish before the bus drains.
      beforeDrain: () => app.close(),
      httpAddress: address,
    };
  },
};
