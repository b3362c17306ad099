import { describe, expect, it } from "vitest";

import { FairQueue } from "./fair-queue.js";

const job = (workspaceKey: string | null, n: number) => ({ workspaceKey, n });
const names = (jobs: ReadonlyArray<{ workspaceKey: string | null; n: number }>) =>
  jobs.map((j) => `${j.workspaceKey ?? "-"}${j.n}`);

describe("FairQueue", () => {
  it("takes the workspaces in turn, each in claim order, the workspace-less jobs as one more", () => {
    const q = new FairQueue<ReturnType<typeof job>>();
    q.push([job("a", 1), job("a", 2), job("a", 3), job("a", 4), job("b", 1), job(null, 1), job("b", 2)]);
    expect(q.length).toBe(7);
    const order = [];
    for (let x = q.shift(); x !== undefined; x = q.shift()) order.push(x);
    expect(names(order)).toEqual(["a1", "b1", "-1", "a2", "b2", "a3", "a4"]);
    expect(q.length).toBe(0);
  });

  it("starts a newcomer's job after at most one of the flooding workspace's", () => {
    const q = new FairQueue<ReturnType<typeof job>>();
    q.push(Array.from({ length: 100 }, (_, i) => job("flood", i)));
    expect(names([q.shift()!])).toEqual(["flood0"]);
    q.push([job("small", 0)]);
    expect(names([q.shift()!, q.shift()!])).toEqual(["flood1", "small0"]);
  });

  it("passes a held workspace's turn to the next, and answers nothing when all are held", () => {
    const q = new FairQueue<ReturnType<typeof job>>();
    q.push([job("a", 1), job("a", 2), job("b", 1)]);
    expect(names([q.shift((k) => k !== "a")!])).toEqual(["b1"]);
    expect(q.shift((k) => k !== "a")).toBeUndefined();
    expect(q.length).toBe(2);
    expect(names([q.shift()!])).toEqual(["a1"]);
  });

  it("drops the jobs named and drains the rest", () => {
    const q = new FairQueue<ReturnType<typeof job>>();
    q.push([job("a", 1), job("b", 1), job("a", 2), job("b", 2)]);
    q.remove((j) => j.n === 1);
    expect(q.length).toBe(2);
    expect(names(q.all())).toEqual(["a2", "b2"]);
    expect(names(q.drain())).toEqual(["a2", "b2"]);
    expect(q.length).toBe(0);
    expect(q.shift()).toBeUndefined();
  });
});
