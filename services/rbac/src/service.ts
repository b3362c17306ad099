import { openRevocationBucket, REVOCATIONS_COMPLETE_KEY } from "@svc/access";
import { followEvents } from "@svc/bus";
import {
  followContributions,
  messageClient,
  type MessageImplementation,
  type PlatformEventData,
  publishBroadcast,
  quietUnlessUp,
  rbacBroadcasts,
  rbacContract,
  resolverMessages,
  type RouteImplementation,
} from "@svc/contracts";
import { afterCommit } from "@svc/db";
import { Outbox } from "@svc/outbox";
import { defineService, startHousekeeping } from "@svc/runtime";

import type { RbacDeps } from "./deps.js";
import { fillRevocations, revoke } from "./deps.js";
import * as integrations from "./integrations.js";
import * as members from "./memberships.js";
import * as notifications from "./notifications.js";
import { passwords } from "./passwords.js";
import { ActivePluginsByWorkspace, applyPluginKeys } from "./plugin-keys.js";
import { deleteExpiredSessions, deleteOldNotifications, findRole } from "./repository.js";
import * as roles from "./roles.js";
import { reportWorkspaceGlobalRoles, seedAccess } from "./seed.js";
import { rbacSettings } from "./settings.js";
import { login, logout, type SignInDeps, signInTables } from "./sign-in.js";
import { createTokenIssuer } from "./tokens.js";
import * as users from "./users.js";

/** Users, credentials, roles, memberships, the permission-key catalogue, sessions and integrations. */
export const rbacService = defineService(rbacContract, {
  settings: rbacSettings,
  // A keyed write's outcome is kept in the transaction of its change.
  keyedWrites: "transaction",
  async start({ bus, db, config, log, nc, provision, reprovision }) {
    const issuer = await createTokenIssuer(config.backendHost.jwtSigningKey, config.backendHost.jwtIssuer);
    if (config.backendHost.jwtSigningKeyIsDefault)
      log.warn("signing tokens with the built-in development key");
    const openRevoked = () =>
      openRevocationBucket(
        nc,
        config.subjectPrefix,
        config.backendHost.accessTokenLifetimeSeconds * 1000,
        config.backendHost.natsReplicas,
      );
    const revoked = await openRevoked();
    // The bucket holds every revoked session that has not expired, from rbac.sessions, whenever it is
    // provisioned: after a NATS reconnect it is created again if the server lost it, and filled again
    // before gateways trust a token. The handle stays valid.
    const fillRevoked = async () => {
      await fillRevocations(db, await openRevoked(), log);
    };
    await fillRevoked();
    await provision("revoked-sessions bucket", fillRevoked);
    // The mark that the bucket is complete lives as long as any entry: written again well within that.
    const remark = setInterval(
      () =>
        void revoked
          .put(REVOCATIONS_COMPLETE_KEY, String(Date.now()))
          .catch((err: unknown) => log.warn({ err }, "could not renew the revocation bucket's mark")),
      Math.max(1_000, Math.floor((config.backendHost.accessTokenLifetimeSeconds * 1000) / 3)),
    );
    remark.unref();
    // Sessions long expired and old notifications: deleted at start, then hourly.
    const retention = startHousekeeping(
      3_600_000,
      async (signal) => {
        const b = config.backendHost;
        const [sessions, notifications] = await Promise.all([
          deleteExpiredSessions(db, b.sessionRetentionDays, { signal }),
          deleteOldNotifications(db, b.notificationRetentionDays, { signal }),
        ]);
        if (sessions + notifications > 0)
          log.info({ sessions, notifications }, "deleted sessions and notifications past their retention");
      },
      log,
      "could not delete sessions or notifications past their retention",
    );
    const outbox = new Outbox<PlatformEventData>({
      db,
      schema: "rbac",
      nc,
      subjectPrefix: config.subjectPrefix,
      databaseUrl: config.databaseUrl,
      log,
    });
    const activePlugins = new ActivePluginsByWorkspace();
    const resolver = messageClient(bus, resolverMessages);
    const deps: RbacDeps = {
      db,
      config,
      issuer,
      outbox,
      revoked,
      log,
      // Once the change is committed: a keyed write runs as one unit of work.
      announceRoleChange: (role) =>
        afterCommit(() => publishBroadcast(bus, rbacBroadcasts["roles.changed"], { role })),
      activePlugins: (workspaceKey) => activePlugins.of(workspaceKey),
      tenancy: (request) => resolver.request("tenancy.lookup", request),
    };
    const hashing = passwords(config.backendHost.passwordHashCost);
    const userDeps: users.UserDeps = {
      users: users.userTables(db, outbox),
      revokeSessions: (sessions) => revoke(deps, sessions),
      passwords: hashing,
    };
    const memberDeps: members.MemberDeps = {
      members: members.memberTables(db, outbox),
      revokeSessions: userDeps.revokeSessions,
      activePlugins: deps.activePlugins,
      tenancy: deps.tenancy,
    };
    const integrationDeps = { integrations: integrations.integrationTables(db) };
    const inboxDeps: notifications.InboxDeps = { inbox: notifications.inboxTables(db) };
    const roleDeps: roles.RoleDeps = {
      roles: roles.roleTables(db),
      users: userDeps.users,
      revokeSessions: userDeps.revokeSessions,
      announceRoleChange: deps.announceRoleChange,
    };
    const signInDeps: SignInDeps = {
      signIn: signInTables(db),
      issuer,
      passwords: hashing,
      lifetimeSeconds: () => config.backendHost.accessTokenLifetimeSeconds,
      tenancy: deps.tenancy,
      activePlugins: deps.activePlugins,
      log: deps.log,
    };
    await seedAccess(db, config.backendHost.rbacRoles);
    await reportWorkspaceGlobalRoles(db, log);

    const messages: MessageImplementation<typeof rbacContract.messages> = {
      "auth.login": (request) => login(signInDeps, request),
      "auth.logout": (request) =>
        logout({ signIn: signInDeps.signIn, revokeSessions: userDeps.revokeSessions }, request),
      "keys.jwks": () => issuer.jwks,
      "roles.grants": async ({ role }) => ({
        role,
        permissions: (await findRole(db, role))?.permissions ?? [],
      }),
    };

    // Operator routes: each handler's request and reply types come from its contract.

    const routes: RouteImplementation<typeof rbacContract.routes> = {
      "roles.list": (req) => roles.listRolesRoute(roleDeps, req),
      "permissions.list": (req) => roles.listPermissionKeys(roleDeps, req),
      "security.permissions.list": (req) => roles.listSecurityPermissionKeys(roleDeps, req),
      "roles.put": (req) => roles.putRole(roleDeps, req),
      "roles.delete": (req) => roles.deleteRole(roleDeps, req),
      "role-assignments.list": (req) => roles.listAssignments(roleDeps, req),
      "role-assignments.put": (req) => roles.putAssignment(roleDeps, req),
      "role-assignments.delete": (req) => roles.deleteAssignment(roleDeps, req),
      "users.create": (req) => users.createUser(userDeps, req),
      "users.list": (req) => users.listUsers(userDeps, req),
      "users.get": (req) => users.getUser(userDeps, req),
      "users.export": (req) => users.exportUser(userDeps, req),
      "users.update": (req) => users.updateUser(userDeps, req),
      "users.activation": (req) => users.setUserActivation(userDeps, req),
      "users.delete": (req) => users.deleteUser(userDeps, req),
      "members.list": (req) => members.listMembers(memberDeps, req),
      "members.put": (req) => members.putMember(memberDeps, req),
      "members.delete": (req) => members.deleteMember(memberDeps, req),
      "member-roles.get": (req) => members.getMemberRoles(memberDeps, req),
      "member-roles.put": (req) => members.putMemberRoles(memberDeps, req),
      "notifications.list": (req) => notifications.listNotifications(inboxDeps, req),
      "notifications.read": (req) => notifications.markRead(inboxDeps, req),
      "integrations.list": (req) => integrations.listIntegrations(integrationDeps, req),
      "integrations.create": (req) => integrations.createIntegration(integrationDeps, req),
      "integrations.delete": (req) => integrations.deleteIntegration(integrationDeps, req),
    };

    // Deleted workspaces' memberships go (their sessions revoked), followed durably: a deletion while rbac
    // was down is caught up when it is back.
    const deletions = await followEvents(
      nc,
      {
        stream: config.eventsStream,
        prefix: config.subjectPrefix,
        durable: `${config.subjectPrefix}-rbac-workspace-deleted`,
        events: "workspace.deleted",
        log,
      },
      async ({ data }) => {
        if (typeof data.workspaceKey === "string") await members.forgetWorkspaces(deps, [data.workspaceKey]);
      },
    );

    // Installed plugins' declared keys join the catalogue (and leave it on uninstall).
    const plugins = followContributions(
      bus,
      async (list) => {
        activePlugins.apply(list);
        await applyPluginKeys(db, list);
      },
      quietUnlessUp(log),
    );
    await outbox.start();
    // Dead letters, opened circuits and refused plugins become notifications (durable consumers).
    const inbox = await notifications.followNotifications(nc, db, {
      stream: config.eventsStream,
      prefix: config.subjectPrefix,
      log,
    });
    // Their consumers were made at start; a server that lost its store lost them too.
    reprovision("notification consumers", async () => {
      await inbox.ensure();
      await deletions.ensure();
    });
    return {
      routes,
      messages,
      // Stop relaying before the connection drains; what is still recorded is relayed by another replica
      // or at the next start.
      beforeDrain: async () => {
        clearInterval(remark);
        plugins.stop();
        inbox.stop();
        deletions.stop();
        await retention.stop();
        await outbox.stop();
      },
    };
  },
});
