export { buildGateway, type GatewayDeps } from "./app.js";
export { gatewayService } from "./service.js";
export { type GatewayConfig, gatewaySettings } from "./settings.js";
export { OPERATOR_ROUTES, type RouteContract as OperatorRoute } from "@svc/contracts";
