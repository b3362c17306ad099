/** Claims of an access token: scope, workspace, permission keys, roles and the session id. */
export interface AccessClaims {
  readonly sub: string;
  readonly svc_scope?: "platform" | "workspace";
  readonly workspace_key?: string;
  readonly permission: readonly string[];
  readonly role: readonly string[];
  /** Session id: revoking the session stops the token. */
  readonly sid: string;
  readonly name?: string;
}

export const TOKEN_AUDIENCE = "svc-api";
