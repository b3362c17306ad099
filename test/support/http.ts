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

/**
 * A caller of the operator API: `api(method, path, token, body?)` sends the token as a bearer and the
 * body as JSON, to the base `base()` gives at the call (tests learn it in `beforeAll`).
 */
export function bearerApi(base: () => string) {
  return (method: string, path: string, token: string, body?: unknown) =>
    http(`${base()}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
}

/** `POST /api/plugins/install` of a package archive (.tgz bytes) as `token`. */
export function installPackage(base: string, token: string, bytes: Buffer): Promise<HttpResponse> {
  return http(`${base}/api/plugins/install`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/gzip" },
    body: bytes,
  });
}

/** `POST /api/auth/login` with a JSON body (and any extra headers, e.g. X-Forwarded-For). */
export function signIn(
  base: string,
  body: { username: string; password: string; workspaceKey?: string },
  headers: Record<string, string> = {},
): Promise<HttpResponse> {
  return http(`${base}/api/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}
