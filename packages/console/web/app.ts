import { KEY, Refused } from './client.js';
import { renderTask } from './task.js';
import { renderOverview, renderTenant, renderWorkers } from './views.js';
import { renderWebhookPanel } from './webhooks.js';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

let current: AbortController | null = null;

/** Shows the view the location hash names; every view gets a signal that stops its timers and streams. */
async function route(): Promise<void> {
  current?.abort();
  current = new AbortController();
  const { signal } = current;
  const view = $<HTMLDivElement>('view');
  const signedIn = sessionStorage.getItem(KEY) !== null;
  $('sign-in').hidden = signedIn;
  $('nav').hidden = !signedIn;
  if (!signedIn) {
    view.replaceChildren();
    $<HTMLInputElement>('admin-key').focus();
    return;
  }
  const [, section, arg] = location.hash.split('/');
  try {
    if (section === 'tenants' && arg) {
      const tenant = decodeURIComponent(arg);
      const hooks = document.createElement('div');
      await renderTenant(view, tenant, signal);
      view.append(hooks);
      await renderWebhookPanel(hooks, tenant, signal);
    } else if (section === 'tasks' && arg) await renderTask(view, decodeURIComponent(arg), signal);
    else if (section === 'workers') await renderWorkers(view, signal);
    else await renderOverview(view, signal);
  } catch (err) {
    // The operator went elsewhere meanwhile: that view's reads were stopped, not refused.
    if (signal.aborted) return;
    if (err instanceof Refused) return signOut(String(err.message));
    const p = document.createElement('p');
    p.className = 'error';
    p.setAttribute('role', 'alert');
    p.textContent = (err as Error).message;
    view.replaceChildren(p);
  }
}

function signOut(reason = ''): void {
  sessionStorage.removeItem(KEY);
  $('sign-in-error').textContent = reason;
  void route();
}

$<HTMLFormElement>('sign-in-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const key = $<HTMLInputElement>('admin-key');
  sessionStorage.setItem(KEY, key.value.trim());
  key.value = '';
  $('sign-in-error').textContent = '';
  void route();
});
$<HTMLFormElement>('open-task').addEventListener('submit', (e) => {
  e.preventDefault();
  const id = $<HTMLInputElement>('task-id').value.trim();
  if (id) location.hash = `#/tasks/${encodeURIComponent(id)}`;
});
$('sign-out').addEventListener('click', () => signOut());
window.addEventListener('hashchange', () => void route());
void route();
