// What a process reports about its own build: in `taskline_build_info` and in `/healthz`.
import { readFileSync } from 'node:fs';
import { Gauge, type Registry } from 'prom-client';

export interface BuildInfo {
  /** The service's package version. */
  version: string;
  /** The source revision the image was built from (`TASKLINE_BUILD_REVISION`), or `unknown`. */
  revision: string;
  /** The Node.js runtime it runs on. */
  node: string;
}

/** Reads `version` from the package.json at `packageJson` (a service's own, next to its `dist`). */
export function buildInfo(packageJson: URL, revision: string): BuildInfo {
  const { version } = JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: string };
  return { version: version ?? '0.0.0', revision: revision || 'unknown', node: process.versions.node };
}

/** `taskline_build_info{version,revision,node_version} 1`, the usual Prometheus info metric. */
export function registerBuildInfo(registry: Registry, build: BuildInfo): void {
  const gauge = new Gauge({
    name: 'taskline_build_info',
    help: 'Always 1; its labels name the version, source revision and Node.js runtime of this process.',
    labelNames: ['version', 'revision', 'node_version'] as const,
    registers: [registry],
  });
  gauge.set({ version: build.version, revision: build.revision, node_version: build.node }, 1);
}
