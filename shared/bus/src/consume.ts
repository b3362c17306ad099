/**
 * Pulling from a durable consumer so that a stalled pull is noticed within seconds. A JetStream leader
 * change (a node lost, a node back) drops the pending pull request, and the client learns of it only by
 * the heartbeats that stop coming: with the library's defaults (30 s pulls, a heartbeat every 15 s) that
 * is 30-60 s without a message and without a word. Here a pull lasts 5 s and the server beats every
 * second, so two missed beats (2 s) make the client pull again; the stall and the recovery are logged.
 */
import type { Consumer, ConsumerMessages } from "@nats-io/jetstream";
import type { Logger } from "@svc/observability";

export const PULL_EXPIRES_MS = 5_000;
export const PULL_HEARTBEAT_MS = 1_000;

export async function consumeWatched(
  consumer: Consumer,
  options: { readonly maxMessages: number; readonly log: Logger; readonly name: string },
): Promise<ConsumerMessages> {
  const messages = await consumer.consume({
    max_messages: options.maxMessages,
    expires: PULL_EXPIRES_MS,
    idle_heartbeat: PULL_HEARTBEAT_MS,
  });
  void (async () => {
    let stalledAt: number | undefined;
    for await (const status of messages.status()) {
      if (status.type === "heartbeats_missed" && stalledAt === undefined) {
        stalledAt = Date.now();
        options.log.warn(
          { consumer: options.name, missed: status.count },
          "the consumer's pull stalled (heartbeats missed, a JetStream leader may have moved): pulling again",
        );
      } else if (status.type === "heartbeat" && stalledAt !== undefined) {
        // The server beats again for the new pull: it is served.
        options.log.info(
          { consumer: options.name, stalledMs: Date.now() - stalledAt },
          "the consumer pulls again",
        );
        stalledAt = undefined;
      }
    }
  })().catch(() => undefined);
  return messages;
}
