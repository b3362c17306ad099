import { describe, expect, it } from "vitest";

import { takeInTurns } from "./matcher.js";

interface Item {
  readonly workspace: string | null;
  readonly n: number;
}
const items = (workspace: string | null, count: number, from = 0): Item[] =>
  Array.from({ length: count }, (_, i) => ({ workspace, n: from + i }));
const workspaceOf = (i: Item) => i.workspace;
const names = (list: readonly Item[]) => list.map((i) => `${i.workspace ?? "platform"}${i.n}`);

describe("the matcher's next batch", () => {
  it("takes a backlog's workspaces in turns, so one workspace's flood does not hold back the others", () => {
    // A flood of 1,000 ahead of two small workspaces' events (and a platform event) in arrival order.
    const pending = [...items("flood", 1_000), ...items("a", 3), ...items(null, 1), ...items("b", 2)];
    const { batch, rest } = takeInTurns(pending, 10, workspaceOf);
    expect(batch).toHaveLength(10);
    // Every small workspace's events are in the first batch, each workspace's in its own order, and the
    // batch keeps the order of arrival.
    expect(names(batch)).toEqual([
      "flood0",
      "flood1",
      "flood2",
      "flood3",
      "a0",
      "a1",
      "a2",
      "platform0",
      "b0",
      "b1",
    ]);
    expect(rest).toHaveLength(pending.length - 10);
    expect(names(rest).slice(0, 2)).toEqual(["flood4", "flood5"]);
    // Nothing lost or taken twice.
    expect(new Set([...batch, ...rest]).size).toBe(pending.length);
  });

  it("shares a batch evenly when every workspace has more than its share", () => {
    const pending = [...items("x", 100), ...items("y", 100), ...items("z", 100)];
    const { batch } = takeInTurns(pending, 30, workspaceOf);
    const count = (w: string) => batch.filter((i) => i.workspace === w).length;
    expect([count("x"), count("y"), count("z")]).toEqual([10, 10, 10]);
    expect(names(batch.filter((i) => i.workspace === "y"))).toEqual(names(items("y", 10)));
  });

  it("takes everything, or the first ones of a single workspace, in order", () => {
    const few = [...items("a", 2), ...items("b", 2)];
    expect(takeInTurns(few, 10, workspaceOf)).toEqual({ batch: few, rest: [] });
    const one = items("a", 20);
    expect(takeInTurns(one, 5, workspaceOf)).toEqual({ batch: one.slice(0, 5), rest: one.slice(5) });
  });
});
