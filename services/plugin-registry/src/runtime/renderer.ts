/**
 * The surface renderer (ADR 0008): a small pool of child processes rendering nunjucks
 * templates (render-worker.mjs, isolate.ts). A render that takes longer than its limit (a template that
 * loops) or whose process dies (a template that exhausts its heap) ends that process, which is replaced;
 * the caller gets an error and serves the shell.
 */
import { bundledWorker, type Isolate, type IsolateWorker, startIsolate } from "./isolate.js";

export interface RenderRequest {
  /** Identifies the chain of plugin versions: compiled templates are cached per chain. */
  readonly chainKey: string;
  readonly roots: ReadonlyArray<{ readonly pluginId: string; readonly dir: string }>;
  readonly entry: string;
  readonly context: unknown;
}

/** The worker beside this module, bundled with nunjucks and the template sandbox. */
const WORKER = bundledWorker(new URL("./render-worker.mjs", import.meta.url), ["nunjucks"]);

export interface SurfaceRendererOptions {
  /** Render processes at most. */
  readonly size: number;
  /** How long a render may take before its process is ended, ms. */
  readonly timeoutMs: number;
  /** Folders holding the templates (where plugins are unpacked): all a render process may read. */
  readonly readable: readonly string[];
  /** Each process's heap limit, MB (default 128). */
  readonly memoryLimitMb?: number;
  /** The module the processes run (default: the one beside this module; tests run the built one). */
  readonly worker?: IsolateWorker;
}

interface Slot {
  worker: Isolate;
  busy: boolean;
  /** The render under way hears here that its process ended (a heap exhausted) before it answered. */
  ended?: (code: number | null, signal: NodeJS.Signals | null) => void;
}

export class SurfaceRenderer {
  private readonly slots: Slot[] = [];
  private readonly queue: Array<() => void> = [];
  private nextId = 0;
  private closed = false;

  constructor(private readonly options: SurfaceRendererOptions) {}

  /** Watches `slot`'s process: its end, while it is the slot's, ends the render under way. */
  private watch(slot: Slot): Slot {
    const worker = slot.worker;
    worker.onExit((code, signal) => {
      if (slot.worker === worker) slot.ended?.(code, signal);
    });
    return slot;
  }

  /** Puts a new process in `slot`. */
  private refill(slot: Slot): void {
    slot.worker = this.spawn();
    this.watch(slot);
  }

  private spawn(): Isolate {
    const worker = this.options.worker ?? WORKER;
    return startIsolate(worker.url, {}, this.options.memoryLimitMb ?? 128, {
      imports: worker.imports,
      readable: this.options.readable,
    });
  }

  private async acquire(): Promise<Slot> {
    for (;;) {
      const free = this.slots.find((s) => !s.busy);
      if (free !== undefined) {
        free.busy = true;
        return free;
      }
      if (this.slots.length < this.options.size) {
        const slot = this.watch({ worker: this.spawn(), busy: true });
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
        // A process that died since its last render is replaced first.
        if (slot.worker.exited) this.refill(slot);
        const worker = slot.worker;
        const settle = () => {
          clearTimeout(timer);
          worker.offMessage(onMessage);
          slot.ended = undefined;
        };
        /** Ends this process and puts a fresh one in the slot. */
        const replace = () => {
          void worker.kill();
          this.refill(slot);
        };
        const timer = setTimeout(() => {
          // A template that does not finish (a loop) is cut off: its process is ended and replaced.
          settle();
          replace();
          reject(new Error(`the template did not finish within ${this.options.timeoutMs} ms`));
        }, this.options.timeoutMs);
        // A process that ends before it answers (a template that exhausted its heap) fails the render at
        // once, not at the time limit.
        slot.ended = (code, signal) => {
          settle();
          if (!this.closed) this.refill(slot);
          reject(new Error(`the render process ended (${signal ?? `exit code ${code}`}) before it answered`));
        };
        const onMessage = (raw: unknown) => {
          const m = raw as { id?: number; html?: string; error?: string; discard?: boolean };
          if (m.id !== id) return;
          settle();
          // A template changed the process's shared state: no later render runs in it.
          if (m.discard === true) replace();
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
