import { request } from "node:http";

export interface HttpResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json<T = unknown>(): T;
}

/**
 * A plain HTTP request with the headers exactly as given. `fetch` cannot be used where the test sets
 * `Host`: it replaces that header with the URL's host.
 */
export function http(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    timeoutMs?: number;
  } = {},
): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text,
          json: <T>() => JSON.parse(text) as T,
        });
      });
      res.on("error", reject);
    });
    req.setTimeout(options.timeoutMs ?? 15_000, () => req.destroy(new Error("request timed out")));
    req.on("error", reject);
    req.end(options.body);
  });
}

/** What a call of `bearerApi` may add to the bearer and the JSON body. */
export interface ApiOptions {
  /** More headers (Idempotency-Key, X-Forwarded-For, Range, X-Svc-Api-Key, …); they win over the defaults. */
  readonly headers?: Record<string, string>;
  /**
   * The body's content type: the body (a string or bytes) is then sent as given, not JSON-encoded (a
   * package archive, a CSV, malformed JSON).
   */
  readonly contentType?: string;
}

/**
 * A caller of the operator API: `api(method, path, token, body?, options?)` sends the token as a bearer
 * (`null`: no Authorization header, an anonymous caller) and the body as JSON (a `FormData` body as
 * multipart/form-data), to the base `base()` gives at the call (tests learn it in `beforeAll`).
 */
export function bearerApi(base: () => string) {
  return async (
    method: string,
    path: string,
    token: string | null,
    body?: unknown,
    options: ApiOptions = {},
  ): Promise<HttpResponse> => {
    let sent: { payload: string | Buffer; contentType: string } | undefined;
    if (body === undefined) sent = undefined;
    else if (options.contentType !== undefined) {
      if (typeof body !== "string" && !Buffer.isBuffer(body))
        throw new TypeError("a body with a content type of its own is a string or a Buffer");
      sent = { payload: body, contentType: options.contentType };
    } else if (body instanceof FormData) {
      // Encoded as fetch encodes it: the parts, and their boundary in the content type.
      const form = new Response(body);
      const contentType = form.headers.get("content-type") as string;
      sent = { payload: Buffer.from(await form.arrayBuffer()), contentType };
    } else sent = { payload: JSON.stringify(body), contentType: "application/json" };
    return http(`${base()}${path}`, {
      method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(sent === undefined ? {} : { "content-type": sent.contentType }),
        ...options.headers,
      },
      body: sent?.payload,
    });
  };
}

/** `POST /api/plugins/install` of a package archive (.tgz bytes) as `token`. */
export function installPackage(base: string, token: string, bytes: Buffer): Promise<HttpResponse> {
  return bearerApi(() => base)("POST", "/api/plugins/install", token, bytes, {
    contentType: "application/gzip",
  });
}

/** `POST /api/auth/login` with a JSON body (and any extra headers, e.g. X-Forwarded-For). */
export function signIn(
  base: string,
  body: { username: string; password: string; workspaceKey?: string },
  headers: Record<string, string> = {},
): Promise<HttpResponse> {
  return bearerApi(() => base)("POST", "/api/auth/login", null, body, { headers });
}
