import {
  followContributions,
  type MessageImplementation,
  type PlatformEventData,
  quietUnlessUp,
  resolverContract,
  type RouteImplementation,
} from "@svc/contracts";
import { MediaStore } from "@svc/media";
import { Outbox } from "@svc/outbox";
import { defineService } from "@svc/runtime";

import { startChangeListener } from "./change-listener.js";
import * as configApi from "./config.js";
import * as customFields from "./custom-fields.js";
import { lookupTenancy, resolveWorkspace, tenancyTables } from "./handlers.js";
import * as media from "./media.js";
import { navigation, publicTables, publicWorkspace, surfaceData } from "./public.js";
import { resolverSettings } from "./settings.js";
import * as surfaces from "./surfaces.js";
import * as tenantHosts from "./tenant-hosts.js";
import * as tenants from "./tenants.js";
import * as workspaces from "./workspaces.js";

/** Tenants, workspaces, surfaces and the public workspace routes' data (ARCHITECTURE.md). */
export const resolverService = defineService(resolverContract, {
  settings: resolverSettings,
  // A keyed write's outcome is kept in the transaction of its change.
  keyedWrites: "transaction",
  async start({ bus, db, nc, config, log }) {
    const tenant = config.backendHost.defaultTenantKey;
    const outbox = new Outbox<PlatformEventData>({
      db,
      schema: "resolver",
      nc,
      subjectPrefix: config.subjectPrefix,
      databaseUrl: config.databaseUrl,
      log,
    });
    const config$ = configApi.configDeps(bus, config.subjectPrefix, config.backendHost.natsReplicas);
    // Custom field definitions come from the installed plugins (their contributions).
    const catalogue = new customFields.CustomFieldCatalogue();
    const follower = followContributions(bus, async (list) => catalogue.apply(list), quietUnlessUp(log));
    const fields: customFields.CustomFieldDeps = { values: customFields.fieldValueTables(db), catalogue };
    const mediaStore = new MediaStore(nc, config.subjectPrefix, config.backendHost.natsReplicas);
    const mediaDeps: media.MediaDeps = { records: media.mediaTables(db, outbox), media: mediaStore };
    const tables = tenancyTables(db);
    const publicRows = publicTables(db);
    const hostDeps: tenantHosts.HostDeps = { hosts: tenantHosts.hostTables(db) };
    const surfaceDeps: surfaces.SurfaceDeps = { surfaces: surfaces.surfaceTables(db) };
    const tenantDeps: tenants.TenantDeps = {
      tenants: tenants.tenantTables(db, outbox),
      mediaBytes: mediaStore,
    };
    const workspaceDeps: workspaces.WorkspaceDeps = {
      workspaces: workspaces.workspaceTables(db, outbox),
      mediaBytes: mediaStore,
    };
    const messages: MessageImplementation<typeof resolverContract.messages> = {
      "workspace.resolve": (request) => resolveWorkspace(tables, tenant, request),
      "workspace.public": (request) => publicWorkspace(publicRows, tenant, request),
      "navigation.get": (request) => navigation(publicRows, tenant, request),
      "surface.data": (request) => surfaceData(publicRows, tenant, request),
      "tenancy.lookup": (request) => lookupTenancy(tables, request),
    };
    const routes: RouteImplementation<typeof resolverContract.routes> = {
      "config.definitions": (req) => configApi.definitions(config$, req),
      "config.effective": (req) => configApi.effective(config$, req),
      "config.put": (req) => configApi.putValues(config$, req),
      "media.list": (req) => media.listMedia(mediaDeps, req),
      "media.upload": (req) => media.uploadMedia(mediaDeps, req),
      "media.content": (req) => media.mediaContent(mediaDeps, req),
      "media.delete": (req) => media.deleteMedia(mediaDeps, req),
      "custom-fields.definitions": (req) => customFields.definitions(fields, req),
      "custom-fields.get": (req) => customFields.getValues(fields, req),
      "custom-fields.put": (req) => customFields.putValues(fields, req),
      "tenants.create": (req) => tenants.createTenant(tenantDeps, req),
      "tenants.list": (req) => tenants.listTenants(tenantDeps, req),
      "tenants.get": (req) => tenants.getTenant(tenantDeps, req),
      "tenants.activate": (req) => tenants.activateTenant(tenantDeps, req),
      "tenants.suspend": (req) => tenants.suspendTenant(tenantDeps, req),
      "tenants.delete": (req) => tenants.deleteTenant(tenantDeps, req),
      "tenant-hosts.list": (req) => tenantHosts.listHosts(hostDeps, req),
      "tenant-hosts.put": (req) => tenantHosts.putHost(hostDeps, req),
      "tenant-hosts.delete": (req) => tenantHosts.deleteHost(hostDeps, req),
      "workspaces.list": (req) => workspaces.listWorkspaces(workspaceDeps, req),
      "workspaces.get": (req) => workspaces.getWorkspace(workspaceDeps, req),
      "workspaces.put": (req) => workspaces.putWorkspace(workspaceDeps, req),
      "workspaces.delete": (req) => workspaces.deleteWorkspace(workspaceDeps, req),
      "surfaces.list": (req) => surfaces.listSurfaces(surfaceDeps, req),
      "surfaces.get": (req) => surfaces.getSurface(surfaceDeps, req),
      "surfaces.put": (req) => surfaces.putSurface(surfaceDeps, req),
      "surfaces.delete": (req) => surfaces.deleteSurface(surfaceDeps, req),
      "snippets.list": (req) => surfaces.listSnippets(surfaceDeps, req),
      "snippets.put": (req) => surfaces.putSnippet(surfaceDeps, req),
      "snippets.delete": (req) => surfaces.deleteSnippet(surfaceDeps, req),
    };
    const listener = startChangeListener(config.databaseUrl, bus, log);
    await outbox.start();
    return {
      routes,
      messages,
      beforeDrain: () => {
        follower.stop();
        return outbox.stop();
      },
      afterDrain: () => listener.stop(),
    };
  },
});
