/**
 * For the handlers' unit tests: the resolver's tenancy lookup over a fixed map of workspaces to their
 * tenants (every workspace and tenant active).
 */
import type { TenancyLookupReply, TenancyLookupRequest } from "@svc/contracts";

export function memoryTenancy(workspaces: Readonly<Record<string, string>>) {
  return async (request: TenancyLookupRequest): Promise<TenancyLookupReply> => ({
    workspaces: request.workspaceKeys.flatMap((k) => {
      const tenantKey = workspaces[k];
      return tenantKey === undefined
        ? []
        : [{ workspaceKey: k, tenantKey, isActive: true, tenantIsActive: true }];
    }),
    tenants: request.tenantKeys.filter((k) => Object.values(workspaces).includes(k)),
  });
}
