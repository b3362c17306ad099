/**
 * Routes the resolver owns (ADR 0003): tenants, workspaces, surfaces, configuration, media, custom fields
 * and snippets. The resolver serves none of them yet: they answer 503 until it does.
 */
import { wkParams } from "./common.js";
import { defineRoutes } from "./route.js";

export const resolverRoutes = defineRoutes("resolver", {
  "tenants.create": {
    method: "POST",
    path: "/api/tenants",
    permission: "tenant.create",
    summary: "Create a tenant",
  },
  "tenants.list": {
    method: "GET",
    path: "/api/tenants",
    permission: "tenant.read",
    summary: "List tenants",
  },
  "tenants.get": {
    method: "GET",
    path: "/api/tenants/:tenantKey",
    permission: "tenant.read",
    summary: "Get a tenant",
  },
  "tenants.activate": {
    method: "POST",
    path: "/api/tenants/:tenantKey/activate",
    permission: "tenant.update",
    summary: "Activate a tenant",
  },
  "tenants.suspend": {
    method: "POST",
    path: "/api/tenants/:tenantKey/suspend",
    permission: "tenant.update",
    summary: "Suspend a tenant",
  },
  "tenants.delete": {
    method: "DELETE",
    path: "/api/tenants/:tenantKey",
    permission: "tenant.delete",
    summary: "Delete a tenant",
  },
  "config.definitions": {
    method: "GET",
    path: "/api/config/definitions",
    permission: "config.read",
    summary: "Configuration definitions",
  },
  "config.effective": {
    method: "GET",
    path: "/api/config/effective",
    permission: "config.read",
    summary: "Effective configuration",
  },
  "config.put": {
    method: "PUT",
    path: "/api/config/values",
    permission: "config.update",
    summary: "Set configuration values",
  },
  "media.list": {
    method: "GET",
    path: "/api/media",
    permission: "media.read",
    summary: "List media",
  },
  "media.content": {
    method: "GET",
    path: "/api/media/:id/content",
    permission: "media.read",
    summary: "Media content",
  },
  "media.upload": {
    method: "POST",
    path: "/api/media",
    permission: "media.manage",
    summary: "Upload media",
  },
  "media.delete": {
    method: "DELETE",
    path: "/api/media/:id",
    permission: "media.manage",
    summary: "Delete media",
  },
  "custom-fields.definitions": {
    method: "GET",
    path: "/api/custom-fields/definitions",
    permission: "customfield.read",
    summary: "Custom field definitions",
  },
  "custom-fields.get": {
    method: "GET",
    path: "/api/custom-fields/:entityName/:entityId",
    permission: "customfield.read",
    summary: "An entity's custom fields",
  },
  "custom-fields.put": {
    method: "PUT",
    path: "/api/custom-fields/:entityName/:entityId",
    permission: "customfield.update",
    summary: "Set an entity's custom fields",
  },
  "workspaces.list": {
    method: "GET",
    path: "/api/workspaces",
    permission: "workspace.read",
    summary: "List workspaces",
  },
  "workspaces.get": {
    method: "GET",
    path: "/api/workspaces/:workspaceKey",
    permission: "workspace.read",
    summary: "Get a workspace",
    params: wkParams,
  },
  "workspaces.put": {
    method: "PUT",
    path: "/api/workspaces/:workspaceKey",
    permission: "workspace.update",
    summary: "Create or update a workspace",
    params: wkParams,
  },
  "workspaces.delete": {
    method: "DELETE",
    path: "/api/workspaces/:workspaceKey",
    permission: "workspace.delete",
    summary: "Delete a workspace",
    params: wkParams,
  },
  "surfaces.list": {
    method: "GET",
    path: "/api/surfaces",
    permission: "workspace.read",
    summary: "List surfaces",
  },
  "surfaces.get": {
    method: "GET",
    path: "/api/surfaces/:surfaceKey",
    permission: "workspace.read",
    summary: "Get a surface",
  },
  "surfaces.put": {
    method: "PUT",
    path: "/api/surfaces/:surfaceKey",
    permission: "workspace.update",
    summary: "Create or update a surface",
  },
  "surfaces.delete": {
    method: "DELETE",
    path: "/api/surfaces/:surfaceKey",
    permission: "workspace.update",
    summary: "Delete a surface",
  },
  "snippets.list": {
    method: "GET",
    path: "/api/snippets",
    permission: "snippet.read",
    summary: "List snippets",
  },
  "snippets.put": {
    method: "PUT",
    path: "/api/snippets/:snippetKey",
    permission: "snippet.update",
    summary: "Create or update a snippet",
  },
  "snippets.delete": {
    method: "DELETE",
    path: "/api/snippets/:snippetKey",
    permission: "snippet.update",
    summary: "Delete a snippet",
  },
});
