import { randomUUID } from 'node:crypto';
import type { TaskStore } from '@taskline/engine';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

type Redis = TaskStore['redis'];

/** JSON-RPC id prefix of the server requests relayed through Redis: `<prefix><uuid>`. */
export const RELAY_ID_PREFIX = 'taskline-relay:';
/** How long an unanswered relayed request (sampling, elicitation during a call) waits. */
const ANSWER_WAIT_S = 300;
const answerKey = (session: string, id: string) => `tl:mcp:relay:${session}:${id}`;

/**
 * Server-to-client requests made during a 2025-era call (sampling, elicitation, roots): the
 * client POSTs its answer to whichever replica the load balancer picks, not necessarily the one
 * holding the call. Each outgoing request gets a unique id; the answer is pushed to a Redis list
 * under it (`postAnswer`), and the replica that sent the request pops it and hands it to its
 * server with the id that server chose. `until` ends the waits when the call's response closes.
 */
export function relayServerRequests(transport: Transport, redis: Redis, session: string, until: AbortSignal) {
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    if (!('method' in message) || !('id' in message)) return send(message, options);
    const original = message.id;
    const id = `${RELAY_ID_PREFIX}${randomUUID()}`;
    const reader = redis.duplicate({ enableAutoPipelining: false });
    reader.on('error', () => undefined);
    until.addEventListener('abort', () => reader.disconnect(), { once: true });
    void reader
      .blpop(answerKey(session, id), ANSWER_WAIT_S)
      .then((popped) => {
        if (!popped || until.aborted) return;
        const answer = JSON.parse(popped[1]) as JSONRPCMessage;
        transport.onmessage?.({ ...answer, id: original } as JSONRPCMessage);
      })
      .catch(() => undefined)
      .finally(() => reader.disconnect());
    return send({ ...message, id }, options);
  };
}

/** Stores a client's answer to a relayed request for the replica that waits for it. */
export async function postAnswer(redis: Redis, session: string, message: { id: string }): Promise<void> {
  const key = answerKey(session, message.id);
  await redis.multi().rpush(key, JSON.stringify(message)).expire(key, ANSWER_WAIT_S).exec();
}
