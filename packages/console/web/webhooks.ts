// The tenant page's webhook panel: the tenant's endpoints (never a secret) and each one's newest delivery attempts.
import { api } from './client.js';
import { h, table, time } from './views.js';

interface Attempt {
  message: string;
  attempt: number;
  at: number;
  ok: boolean;
  status: number | null;
  latencyMs: number;
  response: string;
}
interface Endpoint {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: number | null;
  failures_in_row: number;
  attempts: Attempt[];
}

const state = (e: Endpoint) =>
  e.enabled ? 'enabled' : `disabled (${e.disabledReason ?? 'unknown'}) at ${time(e.disabledAt)}`;

/** One endpoint: its settings, an Enable button when disabled, its newest attempts. */
function endpointBlock(tenant: string, e: Endpoint, redraw: () => void, signal: AbortSignal): HTMLElement {
  const enable = async () => {
    await api(`/tenants/${encodeURIComponent(tenant)}/webhooks/${encodeURIComponent(e.id)}/enable`, {
      method: 'POST',
      signal,
    });
    redraw();
  };
  return h(
    'section',
    { 'aria-label': `Endpoint ${e.url}` },
    h('h3', {}, e.url),
    h(
      'p',
      {},
      `${e.id}: ${e.events.join(', ')}; ${state(e)}; ${e.failures_in_row} failed attempts in a row `,
      e.enabled ? null : h('button', { type: 'button', click: () => void enable() }, 'Enable'),
    ),
    e.attempts.length === 0
      ? h('p', { class: 'muted' }, 'No delivery attempt yet.')
      : table(
          'Newest delivery attempts first',
          ['Message', 'Attempt', 'At', 'Result', 'Status', 'Latency (ms)', 'Response'],
          e.attempts.map((a) => [
            a.message,
            a.attempt,
            time(a.at),
            a.ok ? 'delivered' : 'failed',
            a.status ?? '—',
            a.latencyMs,
            a.response,
          ]),
        ),
  );
}

/** Draws the panel into `into`, and again on Refresh or after an Enable. */
export async function renderWebhookPanel(
  into: HTMLElement,
  tenant: string,
  signal: AbortSignal,
): Promise<void> {
  const draw = async () => {
    const { data } = await api<{ data: Endpoint[] }>(`/tenants/${encodeURIComponent(tenant)}/webhooks`, {
      signal,
    });
    const redraw = () => void draw();
    into.replaceChildren(
      h('h2', {}, 'Webhook endpoints'),
      h('button', { type: 'button', class: 'plain', click: redraw }, 'Refresh'),
      data.length === 0
        ? h('p', { class: 'muted' }, 'This tenant has no webhook endpoint.')
        : h('div', {}, ...data.map((e) => endpointBlock(tenant, e, redraw, signal))),
    );
  };
  await draw();
}
