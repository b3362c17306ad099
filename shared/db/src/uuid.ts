/** Whether `value` is a UUID PostgreSQL's `uuid` type takes in its canonical form (any case): a cast of anything else fails the statement. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
