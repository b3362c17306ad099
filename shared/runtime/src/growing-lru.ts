import { LRUCache } from "lru-cache";

/** What a growing cache takes besides its bound (its time to live, say). */
export type GrowingLruOptions<K extends NonNullable<unknown>, V extends NonNullable<unknown>> = Omit<
  LRUCache.Options<K, V, unknown>,
  "max" | "maxSize" | "sizeCalculation" | "maxEntrySize"
>;

/**
 * An LRU cache of at most `entries` entries whose storage grows as it fills. Given `max`, lru-cache sets
 * aside storage for that many entries when it is made (8 to 16 bytes per slot in four to six arrays: a
 * 50,000-token cache held 1.4 MB in a gateway that had cached nothing); counting each entry as 1 against
 * `maxSize` keeps the same bound, and the same eviction of the least recently used, without it.
 */
export function growingLru<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(
  entries: number,
  options: GrowingLruOptions<K, V> = {},
): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: entries, sizeCalculation: () => 1 });
}
