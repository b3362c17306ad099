import { assertPlatform, openRevocationBucket } from "@svc/access";
import { type Principal, ServiceName } from "@svc/bus";
import { ValidationError } from "@svc/errors";
import { Outbox } from "@svc/outbox";
import type { ServiceDefinition } from "@svc/runtime";

import * as h from "./handlers.js";
import { findRole } from "./repository.js";
import { createTokenIssuer } from "./tokens.js";

/** Users, credentials, roles, memberships, the permission-key catalogue, sessions and integrations. */
export const rbacService: ServiceDefinition = {
  name: ServiceName.Rbac,
  async start({ bus, db, config, log, nc, provision }) {
    const issuer = await createTokenIssuer(config.backendHost.jwtSigningKey, config.backendHost.jwtIssuer);
    if (config.backendHost.jwtSigningKeyIsDefault)
      log.warn("signing tokens with the built-in development key");
    const openRevoked = () =>
      openRevocationBucket(nc, config.subjectPrefix, config.backendHost.accessTokenLifetimeSeconds * 1000);
    const revoked = await openRevoked();
    // After a NATS reconnect the bucket is created again if the server lost it (the handle stays valid).
    await provision("revoked-sessions bucket", async () => void (await openRevoked()));
    const outbox = new Outbox({
      db,
      schema: "rbac",
      nc,
      subjectPrefix: config.subjectPrefix,
      databaseUrl: config.databaseUrl,
      log,
    });
    const deps: h.RbacDeps = { db, config, issuer, outbox, revoked, log };
    await h.seedAccess(db, config);

    bus.serve("rbac.auth.login", (req) => h.login(deps, req), {
      decode: (p) => {
        const b = p as Partial<h.LoginRequest>;
        if (typeof b.userName !== "string" || typeof b.password !== "string") {
          throw new ValidationError([
            { field: "/body", message: "userName and password are required strings" },
          ]);
        }
        return b as h.LoginRequest;
      },
    });
    bus.serve("rbac.keys.jwks", () => issuer.jwks as never);
    bus.serve("rbac.roles.grants", async ({ role }) => ({
      role,
      permissions: (await findRole(db, role))?.permissions ?? [],
    }));

    const announce = (role: string) => bus.broadcast("rbac.roles.changed", { role });
    bus.serveRoute("rbac.roles.list", async (req) => {
      assertPlatform(req.principal, "role.read");
      return { status: 200, body: (await h.listRoles(db)).map(h.roleView) };
    });
    bus.serveRoute("rbac.permissions.list", (req) => {
      assertPlatform(req.principal, "role.read");
      return h.listPermissionKeys(db);
    });
    bus.serveRoute("rbac.roles.put", async (req: Parameters<typeof h.putRole>[1]) => {
      const reply = await h.putRole(deps, req);
      announce(req.params.role);
      return reply;
    });
    bus.serveRoute("rbac.roles.delete", async (req: Parameters<typeof h.deleteRole>[1]) => {
      const reply = await h.deleteRole(deps, req);
      announce(req.params.role);
      return reply;
    });
    bus.serveRoute(
      "rbac.role-assignments.list",
      async (req: { principal: Principal; query: { limit?: number; cursor?: string } }) => {
        // Global role assignments are the platform's: the caller's own principal decides, never a stand-in.
        assertPlatform(req.principal, "role.read");
        const { items, nextCursor } = await h.listUserRows(db, req.principal, req.query);
        return {
          status: 200,
          body: {
            items: items.map((u) => ({ userId: u.id, userName: u.user_name, role: u.global_role })),
            nextCursor,
          },
        };
      },
    );
    bus.serveRoute("rbac.role-assignments.put", (req: Parameters<typeof h.putAssignment>[1]) =>
      h.putAssignment(deps, req),
    );
    bus.serveRoute("rbac.role-assignments.delete", (req: Parameters<typeof h.deleteAssignment>[1]) =>
      h.deleteAssignment(deps, req),
    );

    bus.serveRoute("rbac.users.create", (req: Parameters<typeof h.createUser>[1]) => h.createUser(deps, req));
    bus.serveRoute(
      "rbac.users.list",
      async (req: {
        principal: Parameters<typeof h.listUserRows>[1];
        query: { limit?: number; cursor?: string };
      }) => {
        const { items, nextCursor } = await h.listUserRows(db, req.principal, req.query);
        return { status: 200, body: { items: items.map(h.userView), nextCursor } };
      },
    );
    bus.serveRoute("rbac.users.get", async (req: Parameters<typeof h.exportUser>[1]) => ({
      status: 200,
      body: h.userView(await h.reachableUser(deps, req.principal, req.params.userId)),
    }));
    bus.serveRoute("rbac.users.export", (req: Parameters<typeof h.exportUser>[1]) => h.exportUser(deps, req));
    bus.serveRoute("rbac.users.update", (req: Parameters<typeof h.updateUser>[1]) => h.updateUser(deps, req));
    bus.serveRoute("rbac.users.activation", (req: Parameters<typeof h.setUserActivation>[1]) =>
      h.setUserActivation(deps, req),
    );
    bus.serveRoute("rbac.users.delete", (req: Parameters<typeof h.deleteUser>[1]) => h.deleteUser(deps, req));

    bus.serveRoute("rbac.members.list", (req: Parameters<typeof h.listMembers>[1]) =>
      h.listMembers(deps, req),
    );
    bus.serveRoute("rbac.members.put", (req: Parameters<typeof h.putMember>[1]) => h.putMember(deps, req));
    bus.serveRoute("rbac.members.delete", (req: Parameters<typeof h.deleteMember>[1]) =>
      h.deleteMember(deps, req),
    );
    bus.serveRoute("rbac.member-roles.get", (req: Parameters<typeof h.getMemberRoles>[1]) =>
      h.getMemberRoles(deps, req),
    );
    bus.serveRoute("rbac.member-roles.put", (req: Parameters<typeof h.putMemberRoles>[1]) =>
      h.putMemberRoles(deps, req),
    );

    bus.serveRoute("rbac.integrations.list", (req) => h.listIntegrations(deps, req));
    bus.serveRoute("rbac.integrations.create", (req: Parameters<typeof h.createIntegration>[1]) =>
      h.createIntegration(deps, req),
    );
    bus.serveRoute("rbac.integrations.delete", (req: Parameters<typeof h.deleteIntegration>[1]) =>
      h.deleteIntegration(deps, req),
    );
    await outbox.start();
    return {
      // Stop relaying before the connection drains; what is still recorded is relayed by another replica
      // or at the next start.
      beforeDrain: () => outbox.stop(),
    };
  },
};
