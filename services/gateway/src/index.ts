export { buildGateway, type GatewayDeps } from "./app.js";
export { gatewayService } from "./service.js";
