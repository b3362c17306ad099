/**
 * Pulling from a durable consumer so that a stalled pull is noticed within seconds. A JetStream leader
 * change (a node lost, a node back) drops the pending pull request, and the client learns of it only by
 * the heartbeats that stop coming: with the library's defaults (30 s pulls, a heartbeat every 15 s) that
 * is 30-60 s without a message and without a word. Here a pull lasts 1 s (the library's least) and the
 * server beats every 0.5 s, so two missed beats (1 s) make the client pull again; the stall and the
 * recovery (the first heartbeat or pull after it, idle or busy alike) are logged. An idle consumer costs a
 * pull request a second.
 *
 * Before pulling again the library asks for the consumer's info until it answers, waiting a pull's
 * length between tries; after a reconnect (the client's server was the node lost) it does only that.
 * With the library's 5 s API timeout and 5 s pulls, a consumer whose leader was being elected came back
 * after 10-15 s (`make chaos CHAOS_ARGS=--cluster`); here each try takes 2 s at most and the next one
 * follows 1 s later.
 */
import {
  type ConsumerConfig,
  type ConsumerInfo,
  type ConsumerMessages,
  jetstream,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "@svc/observability";

import { isStreamNotFound } from "./streams.js";

export const PULL_EXPIRES_MS = 1_000;
export const PULL_HEARTBEAT_MS = 500;
/** How long the consumer's JetStream API requests (its info, while recovering) wait for an answer. */
export const CONSUMER_API_TIMEOUT_MS = 2_000;

export async function consumeWatched(
  nc: NatsConnection,
  stream: string,
  options: { readonly maxMessages: number; readonly log: Logger; readonly name: string },
): Promise<ConsumerMessages> {
  const consumer = await jetstream(nc, { timeout: CONSUMER_API_TIMEOUT_MS }).consumers.get(
    stream,
    options.name,
  );
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
      } else if ((status.type === "heartbeat" || status.type === "next") && stalledAt !== undefined) {
        // The server beats again for a pull (an idle consumer), or a pull went out after the consumer's
        // info answered (the library asks for it before pulling again): a leader serves it.
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

/** Whether a JetStream API error says the consumer or its stream does not exist (not: cannot answer now). */
export function isMissingConsumer(error: unknown): boolean {
  return (
    (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound) ||
    isStreamNotFound(error)
  );
}

/**
 * Makes sure a durable consumer exists, after a start or a reconnect: `missing` when it was not there (a
 * server restarted without its store), made again by this call or by another replica meanwhile; a
 * subscription to the consumer that was lost must then be bound anew. Only a "not found" counts as
 * missing: any other failure (a cluster electing a leader, a request timing out) is thrown, the consumer
 * is most likely still there, and the caller keeps its subscription, which the library resumes by itself.
 * Treating a timeout as "missing" tore down a working subscription and bound it again, seconds after a
 * node loss.
 */
export async function ensureDurable(
  jsm: JetStreamManager,
  stream: string,
  config: Partial<ConsumerConfig> & { readonly durable_name: string },
): Promise<{ readonly missing: boolean; readonly info: ConsumerInfo }> {
  try {
    return { missing: false, info: await jsm.consumers.info(stream, config.durable_name) };
  } catch (error) {
    if (!isMissingConsumer(error)) throw error;
  }
  try {
    return { missing: true, info: await jsm.consumers.add(stream, config) };
  } catch (error) {
    // Another replica made it meanwhile.
    const info = await jsm.consumers.info(stream, config.durable_name).catch(() => {
      throw error;
    });
    return { missing: true, info };
  }
}
