/**
 * The surface renderer (ADR 0008): a small pool of child processes rendering nunjucks
 * templates (render-worker.mjs, isolate.ts). A render that takes longer than its limit (a template that
 * loops) or whose process dies (a template that exhausts its heap) ends that process, which is replaced;
 * the caller gets an error and serves the shell.
 */
import { type Isolate, startIsolate } from "./isolate.js";

export interface RenderRequest {
  /** Identifies the chain of plugin versions: compiled templates are cached per chain. */
  readonly chainKey: string;
  readonly roots: ReadonlyArray<{ readonly pluginId: string; readonly dir: string }>;
  readonly entry: string;
  readonly context: unknown;
}

const WORKER_URL = new URL("./render-worker.mjs", import.meta.url);

interface Slot {
  worker: Isolate;
  busy: boolean;
}

export class SurfaceRenderer {
  private readonly slots: Slot[] = [];
  private readonly queue: Array<() => void> = [];
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly size: number,
    private readonly timeoutMs: number,
    /** Folders holding the templates (where plugins are unpacked): all a render process may read. */
    private readonly readable: readonly string[],
    private readonly memoryLimitMb = 128,
  ) {}

  private spawn(): Isolate {
    return startIsolate(WORKER_URL, {}, this.memoryLimitMb, {
      imports: ["nunjucks"],
      readable: this.readable,
    });
  }

  private async acquire(): Promise<Slot> {
    for (;;) {
      const free = this.slots.find((s) => !s.busy);
      if (free !== undefined) {
        free.busy = true;
        return free;
      }
      if (this.slots.length < this.size) {
        const slot = { worker: this.spawn(), busy: true };
        this.slots.push(slot);
        return slot;
      }
      await new Promise<void>((resolve) => this.queue.push(resolve));
    }
  }

  private release(slot: Slot): void {
    slot.busy = false;
    this.queue.shift()?.();
  }

  /** The HTML, or a rejection naming the template error or the time limit. */
  async render(request: RenderRequest): Promise<string> {
    if (this.closed) throw new Error("the renderer is closed");
    const slot = await this.acquire();
    const id = ++this.nextId;
    try {
      return await new Promise<string>((resolve, reject) => {
        // A process that died since its last render (its heap exhausted) is replaced first.
        if (slot.worker.exited) slot.worker = this.spawn();
        const worker = slot.worker;
        /** Ends this process and puts a fresh one in the slot. */
        const replace = () => {
          worker.offMessage(onMessage);
          void worker.kill();
          slot.worker = this.spawn();
        };
        const timer = setTimeout(() => {
          // A template that does not finish (a loop, a heap exhausted) is cut off: its process is ended
          // and replaced.
          replace();
          reject(new Error(`the template did not finish within ${this.timeoutMs} ms`));
        }, this.timeoutMs);
        const onMessage = (raw: unknown) => {
          const m = raw as { id?: number; html?: string; error?: string; discard?: boolean };
          if (m.id !== id) return;
          clearTimeout(timer);
          // A template changed the process's shared state: no later render runs in it.
          if (m.discard === true) replace();
          else worker.offMessage(onMessage);
          if (m.error !== undefined) reject(new Error(m.error));
          else resolve(m.html ?? "");
        };
        worker.onMessage(onMessage);
        worker.send({ id, ...request });
      });
    } finally {
      this.release(slot);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((s) => s.worker.kill()));
    this.slots.length = 0;
  }
}
