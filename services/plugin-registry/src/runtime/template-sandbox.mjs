// What a surface template can reach, for the render process (render-worker.mjs).
// nunjucks compiles `a.b`, `a["b"]` and top-level names into calls of its runtime's `memberLookup` and
// `contextOrFrameLookup`; a template escapes by looking up a function's `constructor` (Function) and
// calling it with code: `{{ range.constructor("…process…")() }}`. `guardTemplates` replaces both lookups:
// - names that lead out of the data (`constructor`, `__proto__`, `prototype`, the getter/setter helpers,
//   `call`/`apply`/`bind`, `caller`/`callee`/`arguments`) look up nothing;
// - a key that is neither a string nor a number looks up nothing (`a[["constructor"]]` would be coerced);
// - a value that is a function constructor, `eval`, `process` or `globalThis` is never handed out.
// What remains callable are the template's data, nunjucks' globals (range, cycler, joiner) and filters,
// and the methods of strings, numbers, arrays and plain objects.
//
// `snapshotGlobals`/`globalsChanged`: defence in depth. Should a template still escape and change the
// process's shared state (the IPC `send`, JSON, the prototypes), the render process notices after the
// render, reports it and exits, so no later render, another tenant's, runs in a tainted process.
/* global process */
import nunjucks from "nunjucks";

const BLOCKED = new Set([
  "constructor",
  "__proto__",
  "prototype",
  "__defineGetter__",
  "__defineSetter__",
  "__lookupGetter__",
  "__lookupSetter__",
  "call",
  "apply",
  "bind",
  "caller",
  "callee",
  "arguments",
]);

const FORBIDDEN_VALUES = new Set([
  Function,
  Object.getPrototypeOf(async function () {}).constructor,
  Object.getPrototypeOf(function* () {}).constructor,
  Object.getPrototypeOf(async function* () {}).constructor,

  eval,
  process,
  globalThis,
]);

export function guardTemplates() {
  const runtime = nunjucks.runtime;
  const memberLookup = runtime.memberLookup;
  const contextOrFrameLookup = runtime.contextOrFrameLookup;
  runtime.memberLookup = function guardedMemberLookup(obj, key) {
    if (obj === undefined || obj === null) return undefined;
    if (typeof key !== "string" && typeof key !== "number") return undefined;
    if (typeof key === "string" && BLOCKED.has(key)) return undefined;
    if (FORBIDDEN_VALUES.has(obj[key])) return undefined;
    return memberLookup(obj, key);
  };
  runtime.contextOrFrameLookup = function guardedContextLookup(context, frame, name) {
    if (BLOCKED.has(name)) return undefined;
    const value = contextOrFrameLookup(context, frame, name);
    return FORBIDDEN_VALUES.has(value) ? undefined : value;
  };
}

/** The shared state a render must leave as it found it. */
const WATCHED = [
  [process, "send"],
  [process, "on"],
  [process, "exit"],
  [JSON, "stringify"],
  [JSON, "parse"],
  [Function.prototype, "call"],
  [Function.prototype, "apply"],
  [Object.prototype, "toString"],
  [Array.prototype, "map"],
  [Array.prototype, "join"],
  [String.prototype, "replace"],
  [Promise.prototype, "then"],
];

const shape = (o) => Object.getOwnPropertyNames(o).join(",");

export function snapshotGlobals() {
  return {
    values: WATCHED.map(([owner, name]) => owner[name]),
    shapes: [globalThis, Object.prototype, Array.prototype, String.prototype, Function.prototype].map(shape),
    nunjucks: [nunjucks.runtime.memberLookup, nunjucks.runtime.contextOrFrameLookup],
  };
}

/** Whether anything watched differs from the snapshot. */
export function globalsChanged(snapshot) {
  const now = snapshotGlobals();
  return (
    now.values.some((v, i) => v !== snapshot.values[i]) ||
    now.shapes.some((s, i) => s !== snapshot.shapes[i]) ||
    now.nunjucks.some((f, i) => f !== snapshot.nunjucks[i])
  );
}
