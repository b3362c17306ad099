/**
 * The deadline of the request being handled, carried through async calls (AsyncLocalStorage), so that
 * deep code can refuse to start or commit work its caller has given up on: a request answered 504 must
 * not change anything afterwards. The bus runs every handler inside its request's deadline; the data
 * layer checks it before each statement and before COMMIT.
 */
import { AsyncLocalStorage } from "node:async_hooks";

import { ErrorCode } from "./codes.js";
import { SvcError } from "./errors.js";

const storage = new AsyncLocalStorage<{ readonly deadline: number }>();

export function runWithDeadline<T>(deadline: number, work: () => T): T {
  return storage.run({ deadline }, work);
}

/**
 * Runs `work` outside any request: what it starts (a process, a timer, a listener) and everything those
 * call back later has no deadline, not the one of the request that happened to start it. For work that
 * outlives its request: a plugin's process, whose events and failures arrive long after its activation.
 */
export function outsideDeadline<T>(work: () => T): T {
  return storage.exit(work);
}

/** The current request's deadline (epoch ms), or undefined outside a request. */
export function currentDeadline(): number | undefined {
  return storage.getStore()?.deadline;
}

/** Throws a 504 problem when the current request's deadline has passed; nothing outside a request. */
export function checkDeadline(): void {
  const deadline = currentDeadline();
  if (deadline !== undefined && Date.now() > deadline) {
    throw new SvcError(
      ErrorCode.Timeout,
      "The request's deadline passed before its work was done; nothing was changed.",
    );
  }
}
