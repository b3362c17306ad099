/**
 * The claimed jobs a lane has not started yet, taken round the workspaces: each workspace (the
 * workspace-less jobs count as one) keeps its jobs in the order they were claimed, and the workspaces take
 * turns. While one workspace's jobs fill the queue, another's job starts next after at most one of them,
 * not after all. A workspace may be held back (its running jobs are at the per-workspace limit): the turn
 * passes to the next one.
 */
export interface QueuedJob {
  readonly workspaceKey: string | null;
}

export class FairQueue<J extends QueuedJob> {
  /** By workspace ('' for none), in turn order: the next turn is the first entry's. */
  private readonly byWorkspace = new Map<string, J[]>();
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(jobs: readonly J[]): void {
    for (const job of jobs) {
      const key = job.workspaceKey ?? "";
      const list = this.byWorkspace.get(key);
      if (list === undefined) this.byWorkspace.set(key, [job]);
      else list.push(job);
    }
    this.size += jobs.length;
  }

  /**
   * The next job to start: the oldest of the first workspace in turn that `mayStart` lets start; that
   * workspace's turn then goes to the back. Undefined when the queue is empty or every workspace is held.
   */
  shift(mayStart: (workspaceKey: string) => boolean = () => true): J | undefined {
    for (const [key, list] of this.byWorkspace) {
      if (!mayStart(key)) continue;
      const job = list.shift() as J;
      this.byWorkspace.delete(key);
      if (list.length > 0) this.byWorkspace.set(key, list);
      this.size--;
      return job;
    }
    return undefined;
  }

  /** The workspaces with jobs queued ('' for none). */
  workspaces(): string[] {
    return [...this.byWorkspace.keys()];
  }

  /** How many jobs of the workspace are queued. */
  count(workspaceKey: string): number {
    return this.byWorkspace.get(workspaceKey)?.length ?? 0;
  }

  /** Every queued job (claim order within each workspace). */
  all(): J[] {
    return [...this.byWorkspace.values()].flat();
  }

  /** Drops the jobs `drop` names (claims taken over). */
  remove(drop: (job: J) => boolean): void {
    for (const [key, list] of this.byWorkspace) {
      const kept = list.filter((job) => !drop(job));
      this.size -= list.length - kept.length;
      if (kept.length === 0) this.byWorkspace.delete(key);
      else this.byWorkspace.set(key, kept);
    }
  }

  /** Empties the queue, answering what it held. */
  drain(): J[] {
    const out = this.all();
    this.byWorkspace.clear();
    this.size = 0;
    return out;
  }
}
