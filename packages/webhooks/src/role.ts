/**
 * The webhook role of a process (the scheduler runs it: docs/webhooks.md, "Where it runs"): the
 * relay's passes and the delivery workers, each loop never overlapping itself.
 */
import type { Logger } from '@taskline/log';
import { DeliveryWorkers, type DeliveryOptions } from './delivery.js';
import { Relay, type RelayOptions } from './relay.js';

export interface RoleOptions {
  relay: RelayOptions;
  delivery: DeliveryOptions;
  /** Between relay passes (TASKLINE_WEBHOOK_RELAY_MS). */
  relayMs: number;
  /** Between looks for endpoints added, deleted, disabled (the relay's interval times ten). */
  refreshMs?: number;
  logger: Logger;
}

export class WebhookRole {
  readonly relay: Relay;
  readonly delivery: DeliveryWorkers;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Each loop's pass in flight: a stop waits for them, so none writes after it. */
  private readonly passes = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(private readonly o: RoleOptions) {
    this.relay = new Relay(o.relay);
    this.delivery = new DeliveryWorkers(o.delivery);
  }

  start(): void {
    this.loop('webhook-relay', this.o.relayMs, () => this.relay.pass());
    this.loop('webhook-workers', this.o.refreshMs ?? this.o.relayMs * 10, () => this.delivery.refresh());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    await Promise.all(this.passes.values());
    await this.delivery.shutdown();
    await this.relay.shutdown();
  }

  private loop(name: string, everyMs: number, run: () => Promise<unknown>): void {
    const tick = async () => {
      const pass = run().then(
        () => undefined,
        (err: unknown) => this.o.logger.warn('webhook_loop_failed', { loop: name, err }),
      );
      this.passes.set(name, pass);
      await pass;
      if (!this.stopped)
        this.timers.set(
          name,
          setTimeout(() => void tick(), everyMs),
        );
    };
    void tick();
  }
}
