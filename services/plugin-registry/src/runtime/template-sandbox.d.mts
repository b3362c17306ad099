/** Types of template-sandbox.mjs (plain JavaScript, loaded by the render process). */
export interface GlobalsSnapshot {
  readonly values: readonly unknown[];
  readonly shapes: readonly string[];
  readonly nunjucks: readonly unknown[];
}
export function guardTemplates(): void;
export function snapshotGlobals(): GlobalsSnapshot;
export function globalsChanged(snapshot: GlobalsSnapshot): boolean;
