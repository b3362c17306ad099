/**
 * The one rule for event-name patterns (ADR 0014): a pattern matches an event
 * name when it equals it, or when it ends in `*` and the name starts with what comes before (`*` alone
 * matches every name). The patterns that match `eventName`: the name itself and each of its prefixes
 * followed by `*`. Delivery (`matchingSubscriptionsAndFlows`) and `matchesKnownEvent` both use it.
 */
export function patternsMatching(eventName: string): string[] {
  const out = [eventName];
  for (let i = 0; i <= eventName.length; i++) out.push(`${eventName.slice(0, i)}*`);
  return out;
}

/** Whether `pattern` matches `eventName`, by the same rule. */
export function patternMatches(pattern: string, eventName: string): boolean {
  return patternsMatching(eventName).includes(pattern);
}
