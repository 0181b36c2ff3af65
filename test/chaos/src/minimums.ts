/**
 * A chaos run that checked nothing proves nothing: every invariant must have checked at least its
 * minimum, and every fault kind must have been injected, or the run fails.
 */
import type { Invariant } from './observed.js';
import { DELTAS_INVARIANT } from './visible.js';
import { MIN_HOOKED_TASKS, WEBHOOKS_INVARIANT } from './webhooks.js';
import { MIN_WORKER_TOOL_TASKS, WORKER_TOOLS_INVARIANT } from './worker-tools.js';

/** Minimum counts above 1 for some invariants (by name prefix); every other one needs 1. */
const AT_LEAST: [string, number][] = [
  ['acknowledged task exists', 20],
  ['event stream is 1..N', 20],
  [DELTAS_INVARIANT, 20],
  [WORKER_TOOLS_INVARIANT, MIN_WORKER_TOOL_TASKS],
  [WEBHOOKS_INVARIANT, MIN_HOOKED_TASKS],
];

/** Fault actions (target and action, as the report counts them) every run must have injected. */
export function requireMinimums(
  invariants: Invariant[],
  faults: { target: string; action: string }[],
  required: readonly string[],
  redisKinds: readonly string[],
): Invariant {
  const violations: string[] = [];
  for (const i of invariants) {
    const min = AT_LEAST.find(([prefix]) => i.name.startsWith(prefix))?.[1] ?? 1;
    if (i.checked < min) violations.push(`"${i.name}" checked ${i.checked}, at least ${min} required`);
  }
  const seen = faults.map((f) => `${f.target.replace(/-\d+$/, '')} ${f.action}`);
  for (const kind of [...redisKinds, ...required]) {
    const [role] = kind.split(' ');
    const n = seen.filter((f) => f.startsWith(`${role} `) && faultKind(f) === kind).length;
    if (n === 0) violations.push(`fault "${kind}" never injected`);
  }
  return { name: 'minimum work per invariant and per fault kind', checked: invariants.length, violations };
}

/** The kind of an injected fault, from its report line ("worker SIGTERM (drain…)" → "worker drain"). */
function faultKind(line: string): string {
  // A Redis action names its node in parentheses: the kind is what comes before.
  if (line.startsWith('redis ')) return line.replace(/ \(.*\)$/, '');
  const [role] = line.split(' ');
  if (line.includes('SIGTERM')) return `${role} drain`;
  if (line.includes('SIGSTOP')) return `${role} pause`;
  if (line.includes('SIGKILL')) return `${role} SIGKILL`;
  return line;
}
