/**
 * A list of observers of one kind of occurrence: each is added (never assigned over another) and removed by
 * what `add` returned; `notify` tells every one, in the order added. An observer that throws is ignored:
 * watching must not break what is watched.
 */
export class Observers<A extends unknown[]> {
  private readonly list = new Set<(...args: A) => void>();

  /** True while no one observes (callers skip timing work then). */
  get empty(): boolean {
    return this.list.size === 0;
  }

  /** Adds an observer; the function returned removes it. */
  add(observer: (...args: A) => void): () => void {
    this.list.add(observer);
    return () => void this.list.delete(observer);
  }

  notify(...args: A): void {
    for (const observer of this.list) {
      try {
        observer(...args);
      } catch {
        // an observer's failure is its own
      }
    }
  }
}
