export { buildGateway, type GatewayDeps } from "./app.js";
export { OPERATOR_ROUTES, type OperatorRoute } from "./routes/catalogue.js";
export { gatewayService } from "./service.js";
