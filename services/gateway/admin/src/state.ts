/** A value components re-render on: `useSignal(s)` subscribes, `s.set(v)` notifies. */
import { useEffect, useState } from "preact/hooks";

export interface Signal<T> {
  get(): T;
  set(value: T): void;
  subscribe(listener: () => void): () => void;
}

export function signal<T>(initial: T): Signal<T> {
  let value = initial;
  const listeners = new Set<() => void>();
  return {
    get: () => value,
    set(next) {
      value = next;
      for (const l of [...listeners]) l();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export function useSignal<T>(s: Signal<T>): T {
  const [, render] = useState(0);
  useEffect(() => s.subscribe(() => render((n) => n + 1)), [s]);
  return s.get();
}

/** The console's path under /admin/ (`/plugins`), and navigation without a reload. */
export const route = signal(location.pathname.replace(/^\/admin/, "") || "/");
export function navigate(path: string): void {
  history.pushState(null, "", `/admin${path}`);
  route.set(path);
}
addEventListener("popstate", () => route.set(location.pathname.replace(/^\/admin/, "") || "/"));
