// The pipeline's "deploy": copies the build output into a release folder named by the task's idempotency key.
import { cp, mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

export interface Deployment {
  /** Where the release is. */
  path: string;
  /** False when an earlier attempt of the same task had already deployed it. */
  created: boolean;
}

/**
 * Copies `buildDir` to `<target>/<release>`, where the release is named by the task's
 * idempotency key, the same on every attempt: an attempt that runs again after a crash between
 * the copy and its result finds its release there and does nothing. The copy goes to a hidden
 * folder first and is renamed into place, so a release is either whole or absent.
 */
export async function deploy(buildDir: string, target: string, idempotencyKey: string): Promise<Deployment> {
  const release = `release-${idempotencyKey.replace(/[^A-Za-z0-9._-]/g, '_')}`;
  const path = join(target, release);
  if (await exists(path)) return { path, created: false };
  const partial = join(target, `.${release}.partial`);
  await mkdir(target, { recursive: true });
  await rm(partial, { recursive: true, force: true });
  await cp(buildDir, partial, { recursive: true });
  await rename(partial, path);
  return { path, created: true };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
