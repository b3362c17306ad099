import { ServiceName } from "@svc/bus";
import type { ServiceDefinition } from "@svc/runtime";

/**
 * Users, credentials, roles, memberships, the permission-key catalogue and sessions.
 * This foundation answers `rbac.ping` and owns its schema; its handlers arrive with the issues that build it.
 */
export const rbacService: ServiceDefinition = {
  name: ServiceName.Rbac,
  start() {
    return undefined;
  },
};
