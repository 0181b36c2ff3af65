// Server-to-client requests of 2025-era calls relayed through Redis to whichever replica holds the stream.
import { randomUUID } from 'node:crypto';
import type { TaskStore } from '@taskline/engine';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { ReplicaChannel } from './channel.js';

type Redis = TaskStore['redis'];

/** JSON-RPC id prefix of the server requests relayed through Redis: `<prefix><uuid>`. */
export const RELAY_ID_PREFIX = 'taskline-relay:';
/** How long an unanswered relayed request (sampling, elicitation during a call) waits. */
const ANSWER_WAIT_S = 300;
const answerKey = (session: string, id: string) => `tl:mcp:relay:${session}:${id}`;
/** Where a stored answer is announced to every replica: the message is its key. */
const ANSWERED_CHANNEL = 'tl:mcp:relay:answered';

/**
 * Server-to-client requests made during a 2025-era call (sampling, elicitation, roots): the
 * client POSTs its answer to whichever replica the load balancer picks, not necessarily the one
 * holding the call. Each outgoing request gets a unique id; the answer is pushed to a Redis list
 * under it and announced on a `ReplicaChannel` (`post`), and the replica that sent the request
 * pops it and hands it to its server with the id that server chose. A question that waits for a
 * person may wait minutes: however many wait, a replica holds one subscription for them all.
 */
export class LegacyRelay {
  private readonly answers: ReplicaChannel;

  constructor(private readonly redis: Redis) {
    // An answer announced while the subscription was remade is still in its list.
    this.answers = new ReplicaChannel(redis, ANSWERED_CHANNEL, (keys) =>
      keys.forEach((key) => this.answers.tellHere(key)),
    );
  }

  /** Relays `transport`'s server requests of `session`'s call; `until` ends their waits when the call's response closes. */
  relay(transport: Transport, session: string, until: AbortSignal): void {
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => {
      if (!('method' in message) || !('id' in message) || until.aborted) return send(message, options);
      const original = message.id;
      const id = `${RELAY_ID_PREFIX}${randomUUID()}`;
      const key = answerKey(session, id);
      const release = this.answers.hold(key, () => {
        this.redis.lpop(key).then(
          (popped) => {
            if (popped === null || until.aborted) return;
            done();
            transport.onmessage?.({
              ...(JSON.parse(popped) as JSONRPCMessage),
              id: original,
            } as JSONRPCMessage);
          },
          () => undefined,
        ); // Redis away: the resync after its return looks again
      });
      const timer = setTimeout(() => done(), ANSWER_WAIT_S * 1000);
      timer.unref();
      const done = () => {
        clearTimeout(timer);
        release();
        until.removeEventListener('abort', done);
      };
      until.addEventListener('abort', done, { once: true });
      return send({ ...message, id }, options);
    };
  }

  /** Stores a client's answer to a relayed request for the replica that waits for it. */
  async post(session: string, message: { id: string }): Promise<void> {
    const key = answerKey(session, message.id);
    await this.redis.multi().rpush(key, JSON.stringify(message)).expire(key, ANSWER_WAIT_S).exec();
    await this.answers.publish(key);
  }
}
