export { errorCatalogue, ErrorCode } from "./codes.js";
export { checkDeadline, outsideDeadline, runWithDeadline } from "./deadline.js";
export {
  ConflictError,
  ForbiddenError,
  fromUnexpected,
  InternalError,
  NotFoundError,
  RateLimitedError,
  SecretShownOnceError,
  ServiceUnavailableError,
  SvcError,
  type SvcErrorOptions,
  TimeoutError,
  UnauthenticatedError,
  ValidationError,
  type Violation,
} from "./errors.js";
export { findUnsafeInput, MAX_DEPTH } from "./input-safety.js";
export { fromWire, PROBLEM_CONTENT_TYPE, type ProblemDocument, toProblem } from "./problem.js";
