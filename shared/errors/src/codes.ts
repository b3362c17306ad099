/**
 * The registry of stable error codes. A code is part of the public contract: it travels in the
 * `Svc-Error-Code` reply header and in the `code` member of problem documents. Retired codes are never
 * reused; mark them retired here instead of deleting them.
 */
export const ErrorCode = {
  /** The request is malformed in a way no schema names (unparsable JSON, bad header). */
  BadRequest: "SVC_BAD_REQUEST",
  /** Input failed validation; the problem lists each violation. */
  ValidationFailed: "SVC_VALIDATION_FAILED",
  /** No credentials, or credentials that could not be verified. */
  Unauthenticated: "SVC_UNAUTHENTICATED",
  /** The caller lacks a permission key. */
  Forbidden: "SVC_FORBIDDEN",
  /** The resource does not exist or is not visible to the caller. */
  NotFound: "SVC_NOT_FOUND",
  /** The route exists but not for this HTTP method. */
  MethodNotAllowed: "SVC_METHOD_NOT_ALLOWED",
  /** The request conflicts with the current state (duplicate key, stale version). */
  Conflict: "SVC_CONFLICT",
  /** A path segment is longer than any identifier the API has. */
  UriTooLong: "SVC_URI_TOO_LONG",
  /** The request line and headers exceed the server's limit. */
  HeadersTooLarge: "SVC_HEADERS_TOO_LARGE",
  /** The request was not received in time. */
  RequestTimeout: "SVC_REQUEST_TIMEOUT",
  /** An Idempotency-Key was used before with a different request. */
  IdempotencyKeyReused: "SVC_IDEMPOTENCY_KEY_REUSED",
  /** The request body exceeds the size limit. */
  PayloadTooLarge: "SVC_PAYLOAD_TOO_LARGE",
  /**
   * A plugin package was refused: `reason` names why (an archive, trust or descriptor rule), `path` the
   * file, `errors` each registry.json violation.
   */
  PluginRefused: "SVC_PLUGIN_REFUSED",
  /** A plugin's route handler threw or gave no usable answer; the plugin's own message is only logged. */
  PluginFailed: "SVC_PLUGIN_FAILED",
  /** The request body's media type is not accepted. */
  UnsupportedMediaType: "SVC_UNSUPPORTED_MEDIA_TYPE",
  /** The client exceeded its rate limit. */
  RateLimited: "SVC_RATE_LIMITED",
  /** The owning service is not running or not reachable. */
  ServiceUnavailable: "SVC_SERVICE_UNAVAILABLE",
  /** The owning service did not answer within the request deadline. */
  Timeout: "SVC_TIMEOUT",
  /** An unexpected failure; details are logged, never returned. */
  Internal: "SVC_INTERNAL",
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** HTTP status, problem-type slug and title of each code: the one place errors become HTTP semantics. */
export const errorCatalogue: Readonly<Record<ErrorCode, { status: number; slug: string; title: string }>> = {
  [ErrorCode.BadRequest]: { status: 400, slug: "bad-request", title: "Bad Request" },
  [ErrorCode.ValidationFailed]: { status: 400, slug: "validation-failed", title: "Bad Request" },
  [ErrorCode.Unauthenticated]: { status: 401, slug: "unauthenticated", title: "Unauthorized" },
  [ErrorCode.Forbidden]: { status: 403, slug: "forbidden", title: "Forbidden" },
  [ErrorCode.NotFound]: { status: 404, slug: "not-found", title: "Not Found" },
  [ErrorCode.MethodNotAllowed]: { status: 405, slug: "method-not-allowed", title: "Method Not Allowed" },
  [ErrorCode.Conflict]: { status: 409, slug: "conflict", title: "Conflict" },
  [ErrorCode.IdempotencyKeyReused]: {
    status: 422,
    slug: "idempotency-key-reused",
    title: "Unprocessable Content",
  },
  [ErrorCode.PluginRefused]: { status: 422, slug: "plugin-refused", title: "Unprocessable Content" },
  [ErrorCode.PluginFailed]: { status: 502, slug: "plugin-failed", title: "Bad Gateway" },
  [ErrorCode.UriTooLong]: { status: 414, slug: "uri-too-long", title: "URI Too Long" },
  [ErrorCode.HeadersTooLarge]: {
    status: 431,
    slug: "headers-too-large",
    title: "Request Header Fields Too Large",
  },
  [ErrorCode.RequestTimeout]: { status: 408, slug: "request-timeout", title: "Request Timeout" },
  [ErrorCode.PayloadTooLarge]: { status: 413, slug: "payload-too-large", title: "Payload Too Large" },
  [ErrorCode.UnsupportedMediaType]: {
    status: 415,
    slug: "unsupported-media-type",
    title: "Unsupported Media Type",
  },
  [ErrorCode.RateLimited]: { status: 429, slug: "rate-limited", title: "Too Many Requests" },
  [ErrorCode.ServiceUnavailable]: { status: 503, slug: "service-unavailable", title: "Service Unavailable" },
  [ErrorCode.Timeout]: { status: 504, slug: "timeout", title: "Gateway Timeout" },
  [ErrorCode.Internal]: { status: 500, slug: "internal", title: "Internal Server Error" },
};

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(errorCatalogue, value);
}
