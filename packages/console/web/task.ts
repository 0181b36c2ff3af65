import { api, follow } from './client.js';
import { h, status, table, time } from './views.js';

interface TaskDetail {
  task: Record<string, unknown> & { id: string; status: string; tenant: string };
  timeline: {
    sequence_number: number;
    type: string;
    status: string;
    reason?: string;
    worker?: string;
    operator_action?: { action: string; operator: string };
  }[];
  input_requests: Record<string, unknown>;
}

export async function renderTask(view: HTMLElement, id: string, signal: AbortSignal): Promise<void> {
  const record = h('div');
  const actions = h('div', { class: 'filters' });
  const timeline = h('div');
  const output = h('pre', { id: 'task-output', 'aria-label': 'Output text' });
  const events = h('ol', { id: 'task-events', 'aria-label': 'Events' });
  const live = h('p', { id: 'stream-state', class: 'muted', role: 'status' }, 'Following events…');
  view.replaceChildren(
    h('h1', {}, `Task ${id}`),
    record,
    actions,
    h('h2', {}, 'Timeline'),
    timeline,
    h('h2', {}, 'Output'),
    output,
    h('h2', {}, 'Events'),
    live,
    events,
  );
  const confirmThen = (label: string, run: () => Promise<unknown>, danger: boolean) => {
    const b = h('button', { type: 'button', class: danger ? 'danger' : 'plain' }, label);
    b.addEventListener('click', () => {
      const yes = h('button', { type: 'button', class: 'danger' }, `Yes, ${label.toLowerCase()}`);
      const no = h('button', { type: 'button', class: 'plain' }, 'Keep it');
      const msg = h('p', { role: 'alert' }, `${label}: are you sure?`);
      actions.replaceChildren(msg, yes, no);
      yes.focus();
      no.addEventListener('click', () => void refresh());
      yes.addEventListener(
        'click',
        () =>
          void run().then(refresh, (err: Error) =>
            actions.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message)),
          ),
      );
    });
    return b;
  };
  const refresh = async () => {
    const d = await api<TaskDetail>(`/tasks/${encodeURIComponent(id)}`, { signal });
    const t = d.task;
    record.replaceChildren(
      h(
        'dl',
        {},
        ...[
          'status',
          'tenant',
          'type',
          'tool',
          'model',
          'attempt',
          'on_restart',
          'idempotency_key',
          'lease_owner',
          'lease_until',
          'created_at',
          'updated_at',
          'ended_at',
          'expires_at',
          'status_message',
          'trace_id',
        ].flatMap((k) => [
          h('dt', {}, k.replace(/_/g, ' ')),
          h(
            'dd',
            k === 'status' ? { id: 'task-status' } : {},
            k.endsWith('_at') || k === 'lease_until'
              ? time(t[k] as number | null)
              : k === 'tenant'
                ? h('a', { href: `#/tenants/${encodeURIComponent(t.tenant)}` }, t.tenant)
                : k === 'trace_id' && t.trace_url
                  ? h('a', { href: String(t.trace_url), rel: 'noopener' }, String(t.trace_id))
                  : String(t[k] ?? '—'),
          ),
        ]),
      ),
      t.error ? h('pre', { class: 'error', 'aria-label': 'Error' }, JSON.stringify(t.error, null, 2)) : '',
      Object.keys(d.input_requests).length
        ? h('pre', { 'aria-label': 'Pending input requests' }, JSON.stringify(d.input_requests, null, 2))
        : '',
    );
    const ended = ['succeeded', 'failed', 'cancelled'].includes(t.status);
    actions.replaceChildren(
      ...(ended
        ? [h('span', { class: 'muted' }, 'Ended: no actions.')]
        : [
            confirmThen(
              'Cancel task',
              () => api(`/tasks/${encodeURIComponent(id)}/cancel`, { method: 'POST' }),
              true,
            ),
            confirmThen(
              'Requeue',
              () => api(`/tasks/${encodeURIComponent(id)}/requeue`, { method: 'POST' }),
              false,
            ),
          ]),
    );
    timeline.replaceChildren(
      table(
        'State changes, oldest first',
        ['#', 'Status', 'Event', 'Detail'],
        d.timeline.map((e) => [
          e.sequence_number,
          status(e.status),
          e.type,
          [
            e.reason,
            e.worker && `worker ${e.worker}`,
            e.operator_action && `operator ${e.operator_action.operator}: ${e.operator_action.action}`,
          ]
            .filter(Boolean)
            .join('; '),
        ]),
      ),
    );
  };
  await refresh();
  void follow(
    `/tasks/${encodeURIComponent(id)}/events`,
    (type, seq, data) => {
      if (type === 'response.output_text.delta') output.append(String(data.delta ?? ''));
      events.append(h('li', {}, `${seq} ${type}${data.task_status ? ` (${String(data.task_status)})` : ''}`));
      if (!type.endsWith('.delta')) void refresh().catch(() => undefined);
      const final = /^response\.(completed|incomplete|failed|cancelled)$/.test(type);
      if (final) live.textContent = 'Ended.';
      return final;
    },
    signal,
  ).then((refused) => {
    if (refused) live.textContent = `Not following: ${refused}`;
  });
}
