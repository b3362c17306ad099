/**
 * The one file of a `multipart/form-data` request (@fastify/multipart registered with `files: 1` and the
 * route's size limit), for the routes that take an upload: a media file, a plugin package.
 */
import multipart from "@fastify/multipart";
import { ErrorCode, SvcError } from "@svc/errors";
import type { FastifyInstance, FastifyRequest } from "fastify";

/** Accepts multipart bodies of one file up to `limit` bytes in `app` (an upload routes' own context). */
export async function acceptOneFile(app: FastifyInstance, limit: number): Promise<void> {
  await app.register(multipart, {
    limits: { fileSize: limit, files: 1, fields: 5, parts: 6, fieldSize: 1_000 },
  });
}

const tooLargeCode = (error: unknown) => (error as { code?: string }).code === "FST_REQ_FILE_TOO_LARGE";

/** Reads the file part into memory; `tooLarge` past the limit, `missing` (a 400) without one. */
export async function readOneFile(
  request: FastifyRequest,
  problems: { readonly tooLarge: string; readonly missing: string },
): Promise<{ bytes: Buffer; filename: string }> {
  const tooLarge = () => new SvcError(ErrorCode.PayloadTooLarge, problems.tooLarge);
  const missing = () => new SvcError(ErrorCode.BadRequest, problems.missing);
  let part;
  try {
    part = await request.file();
  } catch (error) {
    throw tooLargeCode(error) ? tooLarge() : missing();
  }
  if (part === undefined) throw missing();
  let bytes: Buffer;
  try {
    bytes = await part.toBuffer();
  } catch (error) {
    if (tooLargeCode(error)) throw tooLarge();
    throw error;
  }
  if (part.file.truncated) throw tooLarge();
  return { bytes, filename: part.filename };
}
