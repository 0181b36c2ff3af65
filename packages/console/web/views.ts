import { api, follow, Refused } from './client.js';
import { lineChart } from './charts.js';

type Attrs = Record<string, string | number | boolean | ((e: Event) => void)>;
type Child = Node | string | number | null | undefined;

/** Builds an element; text always goes in as text (never as HTML), so no data can inject markup. */
export function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === 'function') el.addEventListener(k, v);
    else if (v === true) el.setAttribute(k, '');
    else if (v !== false) el.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

export const table = (caption: string, head: string[], rows: Child[][]) =>
  h(
    'table',
    {},
    h('caption', { class: 'muted' }, caption),
    h('thead', {}, h('tr', {}, ...head.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ...rows.map((r) => h('tr', {}, ...r.map((c) => h('td', {}, c))))),
  );
export const time = (ms: number | null) => (ms ? new Date(ms).toLocaleTimeString() : '—');
export const status = (s: string) => h('span', { class: `status status-${s}` }, s);
const counts = (o: Record<string, number>) =>
  Object.entries(o)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || '—';

/** Queue depth samples while the overview is open (the last 10 minutes at most). */
const depthHistory: { at: number; depth: number; running: number }[] = [];

interface Overview {
  models: {
    model: string;
    queued: number;
    oldest_wait_s: number | null;
    running: number;
    slots_free: number;
    slots_busy: number;
  }[];
  workers: number;
  leader: { address: string } | null;
  throughput: { minute: number; created: number; ended: number }[];
  slo: {
    configured: boolean;
    slos?: { slo: string; window: string; namespace?: string; burn_rate: number }[];
    error?: string;
  };
}
interface TenantRow {
  tenant: string;
  queued: number;
  dispatched: number;
  unfinished: Record<string, number>;
  failures_last_hour: Record<string, number>;
  limits: {
    active_tasks: number;
    max_active_tasks: number;
    open_streams: number;
    max_streams: number;
    request_tokens: number;
    request_burst: number;
  };
}

export async function renderOverview(view: HTMLElement, signal: AbortSignal): Promise<void> {
  const models = h('div');
  const charts = h('div', { class: 'cards' });
  const slo = h('div');
  const tenants = h('div');
  let offset = 0;
  const search = h('input', { id: 'tenant-search', type: 'search', autocomplete: 'off' }) as HTMLInputElement;
  const pager = h('div', { class: 'filters' });
  view.replaceChildren(
    h('h1', {}, 'Overview'),
    h('h2', {}, 'Models'),
    models,
    h('h2', {}, 'Last minutes'),
    charts,
    h('h2', {}, 'SLO burn rates'),
    slo,
    h('h2', {}, 'Tenants'),
    h(
      'div',
      { class: 'filters', role: 'search' },
      h('label', { for: 'tenant-search' }, 'Find tenant'),
      search,
    ),
    tenants,
    pager,
  );
  // Searches overtake one another as the operator types: only the latest one's answer is shown.
  let asked = 0;
  const loadTenants = async () => {
    const mine = ++asked;
    const q = search.value.trim();
    let page: { data: TenantRow[]; total: number; limit: number };
    try {
      page = await api(`/tenants?offset=${offset}&limit=20${q ? `&q=${encodeURIComponent(q)}` : ''}`, {
        signal,
      });
    } catch (err) {
      if (err instanceof Refused) throw err;
      // A refused search (a character no tenant id has) must not leave the last result under it.
      if (mine === asked) {
        tenants.replaceChildren(h('p', { class: 'error', role: 'alert' }, (err as Error).message));
        pager.replaceChildren();
      }
      return;
    }
    if (mine !== asked) return;
    tenants.replaceChildren(
      table(
        'Busiest first; every unfinished task by status; failures by code in the last hour',
        [
          'Tenant',
          'Queued',
          'Dispatched',
          'Unfinished by status',
          'Failures, last hour',
          'Unfinished / cap',
          'Streams / cap',
          'Request tokens',
        ],
        page.data.map((t) => [
          h('a', { href: `#/tenants/${encodeURIComponent(t.tenant)}` }, t.tenant),
          t.queued,
          t.dispatched,
          h('span', { 'data-unfinished': t.tenant }, counts(t.unfinished)),
          counts(t.failures_last_hour),
          `${t.limits.active_tasks} / ${t.limits.max_active_tasks}`,
          `${t.limits.open_streams} / ${t.limits.max_streams}`,
          `${t.limits.request_tokens} / ${t.limits.request_burst}`,
        ]),
      ),
    );
    pager.replaceChildren(
      h('span', { class: 'muted' }, `${page.total} tenants`),
      h(
        'button',
        {
          type: 'button',
          class: 'plain',
          disabled: offset === 0,
          click: () => ((offset = Math.max(0, offset - 20)), void loadTenants()),
        },
        'Previous',
      ),
      h(
        'button',
        {
          type: 'button',
          class: 'plain',
          disabled: offset + 20 >= page.total,
          click: () => ((offset += 20), void loadTenants()),
        },
        'Next',
      ),
    );
  };
  search.addEventListener('input', () => ((offset = 0), void loadTenants().catch(() => undefined)));
  const draw = (o: Overview) => {
    const queued = o.models.reduce((n, m) => n + m.queued, 0);
    depthHistory.push({
      at: Date.now(),
      depth: queued,
      running: o.models.reduce((n, m) => n + m.running, 0),
    });
    while (depthHistory.length > 300) depthHistory.shift();
    models.replaceChildren(
      table(
        `${o.workers} live workers; scheduler leader ${o.leader?.address ?? 'none'}`,
        ['Model', 'Queued', 'Oldest wait', 'Running', 'Free slots', 'Busy slots'],
        o.models.map((m) => [
          m.model,
          h('span', { 'data-queued': m.model }, m.queued),
          m.oldest_wait_s === null ? '—' : `${m.oldest_wait_s.toFixed(1)} s`,
          m.running,
          m.slots_free,
          m.slots_busy,
        ]),
      ),
    );
    charts.replaceChildren(
      h(
        'figure',
        { class: 'card' },
        h('figcaption', {}, 'Queue depth while this page is open'),
        lineChart('Queue depth', [
          { name: 'queued', color: '#a3191c', values: depthHistory.map((s) => s.depth) },
          { name: 'running', color: '#0b5cad', values: depthHistory.map((s) => s.running) },
        ]),
      ),
      h(
        'figure',
        { class: 'card' },
        h('figcaption', {}, 'Tasks per minute, last 15 minutes'),
        lineChart('Throughput', [
          { name: 'created', color: '#0b5cad', values: o.throughput.map((t) => t.created) },
          { name: 'ended', color: '#1d6b2f', values: o.throughput.map((t) => t.ended) },
        ]),
      ),
    );
    slo.replaceChildren(
      !o.slo.configured
        ? h('p', { id: 'slo-state' }, 'Prometheus is not configured (TASKLINE_PROMETHEUS_URL).')
        : o.slo.error
          ? h('p', { class: 'error', id: 'slo-state' }, o.slo.error)
          : table(
              'Error budget burn rate (1 = spending the budget exactly)',
              ['SLO', 'Namespace', 'Window', 'Burn rate'],
              (o.slo.slos ?? []).map((s) => [s.slo, s.namespace ?? '', s.window, s.burn_rate.toFixed(2)]),
            ),
    );
  };
  // A refused key signs out here, before any stream opens.
  await loadTenants();
  // The overview is pushed (SSE, resumed with Last-Event-ID); the tenant table is read again with each.
  void follow(
    '/overview/events',
    (type, _id, data) => {
      if (type !== 'overview') return;
      draw(data as unknown as Overview);
      void loadTenants().catch(() => undefined);
    },
    signal,
  ).then((refused) => {
    if (refused)
      models.replaceChildren(
        h('p', { class: 'error', role: 'alert' }, `Not following the overview: ${refused}`),
      );
  });
}

interface TaskRowJson {
  id: string;
  type: string;
  status: string;
  model: string;
  /** A tool task's tool; null for a response. */
  tool: string | null;
  created_at: number;
  error_code: string | null;
}

/** The task statuses, as the admin API's OpenAPI document lists them (the engine's one table). */
async function taskStatuses(signal: AbortSignal): Promise<string[]> {
  const doc = await api<{ components: { schemas: { TaskStatus: { enum: string[] } } } }>('/openapi.json', {
    signal,
  });
  return doc.components.schemas.TaskStatus.enum;
}

export async function renderTenant(view: HTMLElement, tenant: string, signal: AbortSignal): Promise<void> {
  const select = (id: string, label: string, options: string[]) => [
    h('label', { for: id }, label),
    h('select', { id }, ...options.map((o) => h('option', { value: o }, o || 'any'))),
  ];
  const model = h('input', { id: 'f-model', size: 12 }) as HTMLInputElement;
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Filter tasks' },
    ...select('f-status', 'Status', ['', ...(await taskStatuses(signal))]),
    ...select('f-type', 'Type', ['', 'response', 'tool']),
    h('label', { for: 'f-model' }, 'Model'),
    model,
    ...select('f-age', 'Created within (s)', ['', '300', '3600', '86400']),
  );
  const list = h('div');
  const more = h('div');
  view.replaceChildren(h('h1', {}, `Tenant ${tenant}`), form, list, more);
  const value = (id: string) => (document.getElementById(id) as HTMLInputElement).value;
  type Page = { data: TaskRowJson[]; next_cursor: string | null };
  const base = `/tenants/${encodeURIComponent(tenant)}/tasks`;
  const query = (cursor: string | null) => {
    const q = new URLSearchParams({ limit: '50' });
    for (const [k, id] of [
      ['status', 'f-status'],
      ['type', 'f-type'],
      ['model', 'f-model'],
      ['max_age_s', 'f-age'],
    ] as const)
      if (value(id)) q.set(k, value(id));
    if (cursor) q.set('cursor', cursor);
    return String(q);
  };
  const show = (page: Page, older: boolean) => {
    const rows = page.data.map((t) => [
      h('a', { href: `#/tasks/${t.id}` }, t.id),
      status(t.status),
      t.type,
      t.tool ?? '',
      t.model,
      time(t.created_at),
      t.error_code ?? '',
    ]);
    const tbl = table('Newest first', ['Task', 'Status', 'Type', 'Tool', 'Model', 'Created', 'Error'], rows);
    if (older) list.append(tbl);
    else list.replaceChildren(tbl);
    more.replaceChildren(
      page.next_cursor
        ? h(
            'button',
            {
              type: 'button',
              class: 'plain',
              // Paging back stops following: the rows would move under the operator's eyes.
              click: () => {
                following?.abort();
                void api<Page>(`${base}?${query(page.next_cursor)}`, { signal }).then((p) => show(p, true));
              },
            },
            'Older tasks',
          )
        : h('p', { class: 'muted' }, 'End of the list.'),
    );
  };
  // The first page is pushed as it changes (SSE) until the operator pages back or filters again.
  let following: AbortController | null = null;
  signal.addEventListener('abort', () => following?.abort());
  const followFirst = () => {
    following?.abort();
    const mine = (following = new AbortController());
    void follow(
      `${base}/events?${query(null)}`,
      (type, _id, data) => void (type === 'tasks' && show(data as unknown as Page, false)),
      mine.signal,
    ).then((refused) => {
      // A refused filter (a model id with a space) must not leave the last list under it.
      if (refused && following === mine) {
        list.replaceChildren(
          h('p', { class: 'error', role: 'alert' }, `Not following this list: ${refused}`),
        );
        more.replaceChildren();
      }
    });
  };
  form.addEventListener('change', followFirst);
  // Enter in the model field would submit the form: a navigation that reloads the page.
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    followFirst();
  });
  // The first read is plain JSON: a refused key signs out here.
  show(await api<Page>(`${base}?${query(null)}`, { signal }), false);
  followFirst();
}

interface Workers {
  leader: { address: string; ttlMs: number } | null;
  reported_at: number | null;
  workers: {
    worker_id: string;
    models: { model: string; slots: number; free: number }[];
    draining: boolean;
    last_heartbeat_at: number;
    lease_renewals: number;
    /** A tool worker's tools and versions; empty for a gpu-worker. */
    tools: { name: string; version: string }[];
  }[];
}

export async function renderWorkers(view: HTMLElement, signal: AbortSignal): Promise<void> {
  const body = h('div');
  view.replaceChildren(h('h1', {}, 'Workers and schedulers'), body);
  const draw = (w: Workers) =>
    body.replaceChildren(
      h(
        'p',
        {},
        w.leader
          ? `Scheduler leader: ${w.leader.address} (lease ${w.leader.ttlMs} ms left)`
          : 'No scheduler leads now.',
      ),
      table(
        `As the leader reported them at ${time(w.reported_at)}`,
        ['Worker', 'Models (busy / slots)', 'Tool versions', 'Draining', 'Lease renewals', 'Last heartbeat'],
        w.workers.map((x) => [
          x.worker_id,
          x.models.map((m) => `${m.model} ${m.slots - m.free} / ${m.slots}`).join(', '),
          (x.tools ?? []).map((t) => `${t.name}@${t.version}`).join(', '),
          x.draining ? 'yes' : 'no',
          h('span', { 'data-renewals': x.worker_id }, x.lease_renewals),
          time(x.last_heartbeat_at),
        ]),
      ),
    );
  // The first state comes from the JSON route (a refused key signs out), then the stream pushes.
  draw(await api<Workers>('/workers', { signal }));
  void follow(
    '/workers/events',
    (type, _id, data) => void (type === 'workers' && draw(data as unknown as Workers)),
    signal,
  ).then((refused) => {
    if (refused) body.prepend(h('p', { class: 'error', role: 'alert' }, `Not following workers: ${refused}`));
  });
}
