// A test stack: Redis, scheduler, workers and api processes started together.
import { join } from 'node:path';
import { freePort } from './ports.js';
import { startRedis, type RedisServer } from './redis.js';
import { Service, type ServiceKind, type ServiceOptions } from './service.js';

/** An api process on a port of its own, kept across restarts. */
export class ApiService extends Service {
  constructor(
    readonly port: number,
    options: Omit<ServiceOptions, 'kind'>,
  ) {
    super({
      ...options,
      kind: 'api',
      // A metrics port of its own unless the test names one: the default (9464) is one per machine,
      // and test files run side by side.
      env: {
        TASKLINE_HOST: '127.0.0.1',
        TASKLINE_METRICS_PORT: '0',
        ...options.env,
        TASKLINE_PORT: String(port),
      },
    });
  }

  /** `http://127.0.0.1:<port>` */
  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The metrics listener (`TASKLINE_METRICS_PORT`) of the current process, once up. */
  get metricsBase(): string {
    return `http://127.0.0.1:${String(this.readyLine?.metrics_port)}`;
  }
}

/** What a stack needs of its Redis: where it is (every process's `REDIS_URL`) and how to stop it. */
export interface StackRedis {
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Where a stack's Redis comes from: a server passed in (left running by `stop`), or a function
 * that starts one (stopped with the stack), e.g. `startRedisCluster`. By default a `redis-server`
 * of the stack's own.
 */
export type RedisSource<R extends StackRedis = RedisServer> = R | (() => Promise<R>);

export interface StackOptions<R extends StackRedis = RedisServer> {
  redis?: RedisSource<R>;
  /** Env of every process, on top of `REDIS_URL` and `TASKLINE_METRICS_PORT=0`. */
  env?: Record<string, string>;
  /** Processes started with the stack: one scheduler, no worker and no api by default. */
  schedulers?: number;
  workers?: number;
  apis?: number;
  /** Env of the processes started with the stack, per kind (on top of `env`). */
  schedulerEnv?: Record<string, string>;
  workerEnv?: Record<string, string>;
  apiEnv?: Record<string, string>;
  /** Per kind, a script run instead of the service's `main` (see `ServiceOptions.entry`). */
  entries?: Partial<Record<ServiceKind, string>>;
  nodeArgs?: string[];
  /** Each process's output goes to `<logDir>/<name>.log` instead of memory. */
  logDir?: string;
  /** Drain every process's output unread once it is up (see `ServiceOptions`). */
  drainWhenUp?: boolean;
}

/** One process's own settings: its name (for errors and its log file). */
export interface StartOptions {
  name?: string;
}

/**
 * Redis and Taskline's services as separate processes, the way production runs them. Every
 * process gets the stack's `env` (its Redis URL from the one `redis` the stack was given);
 * `scheduler`, `worker` and `api` add more, and `stop` kills them all by PID.
 */
export class Stack<R extends StackRedis = RedisServer> {
  readonly schedulers: Service[] = [];
  readonly workers: Service[] = [];
  readonly toolWorkers: Service[] = [];
  readonly apis: ApiService[] = [];
  /** Control-plane port of each scheduler, for the workers' `TASKLINE_SCHEDULER_ADDR`. */
  private readonly controlPorts = new Map<Service, number>();

  private constructor(
    readonly redis: R,
    private readonly ownsRedis: boolean,
    private readonly options: StackOptions<R>,
  ) {}

  /** What every process of the stack gets. */
  get env(): Record<string, string> {
    return { REDIS_URL: this.redis.url, TASKLINE_METRICS_PORT: '0', ...this.options.env };
  }

  /** Every scheduler's control address, as workers are told them. */
  get schedulerAddr(): string {
    return this.schedulers.map((s) => `127.0.0.1:${this.controlPorts.get(s)}`).join(',');
  }

  /** Starts a scheduler on control port `port`; `up` settles once it is ready. */
  scheduler(port: number, env: Record<string, string> = {}, opts: StartOptions = {}): Service {
    const s = this.service('scheduler', this.schedulers, opts, {
      TASKLINE_CONTROL_PORT: String(port),
      TASKLINE_CONTROL_ADVERTISE: `127.0.0.1:${port}`,
      ...env,
    });
    this.controlPorts.set(s, port);
    void s.start();
    return s;
  }

  /** Starts a gpu-worker that reports to every scheduler started so far. */
  worker(env: Record<string, string> = {}, opts: StartOptions = {}): Service {
    const s = this.service('gpu-worker', this.workers, opts, {
      TASKLINE_SCHEDULER_ADDR: this.schedulerAddr,
      ...env,
    });
    void s.start();
    return s;
  }

  /**
   * Starts a tool worker serving the tools of `module` (TASKLINE_TOOL_MODULE), reporting to every
   * scheduler so far; a TypeScript module (a test's fixture) is loaded through tsx.
   */
  toolWorker(module: string, env: Record<string, string> = {}, opts: StartOptions = {}): Service {
    const loader = module.endsWith('.ts') ? ['--import', 'tsx'] : [];
    const s = this.service(
      'tool-worker',
      this.toolWorkers,
      opts,
      {
        TASKLINE_SCHEDULER_ADDR: this.schedulerAddr,
        TASKLINE_TOOL_MODULE: module,
        ...env,
      },
      loader,
    );
    void s.start();
    return s;
  }

  /** Starts an api process on `port`. */
  api(port: number, env: Record<string, string> = {}, opts: StartOptions = {}): ApiService {
    const name = opts.name ?? `api-${this.apis.length + 1}`;
    const s = new ApiService(port, this.serviceOptions('api', name, env));
    this.apis.push(s);
    void s.start();
    return s;
  }

  private service(
    kind: ServiceKind,
    list: Service[],
    opts: StartOptions,
    env: Record<string, string>,
    loader: string[] = [],
  ) {
    const name = opts.name ?? `${kind === 'gpu-worker' ? 'worker' : kind}-${list.length + 1}`;
    const options = this.serviceOptions(kind, name, env);
    const s = new Service({ kind, ...options, nodeArgs: [...loader, ...(options.nodeArgs ?? [])] });
    list.push(s);
    return s;
  }

  private serviceOptions(
    kind: ServiceKind,
    name: string,
    env: Record<string, string>,
  ): Omit<ServiceOptions, 'kind'> {
    const { nodeArgs, logDir, drainWhenUp } = this.options;
    return {
      name,
      drainWhenUp,
      env: { ...this.env, ...env },
      entry: this.options.entries?.[kind],
      nodeArgs,
      logFile: logDir ? join(logDir, `${name}.log`) : undefined,
    };
  }

  /** Kills every process (SIGKILL) and stops a Redis the stack started. */
  async stop(): Promise<void> {
    await Promise.all(
      [...this.schedulers, ...this.workers, ...this.toolWorkers, ...this.apis].map((s) => s.stop()),
    );
    if (this.ownsRedis) await this.redis.stop();
  }

  static async start<R extends StackRedis = RedisServer>(options: StackOptions<R> = {}): Promise<Stack<R>> {
    // Without a source the stack's own server, whose type is the default R.
    const source = options.redis ?? ((() => startRedis()) as unknown as () => Promise<R>);
    const redis = typeof source === 'function' ? await source() : source;
    const stack = new Stack<R>(redis, typeof source === 'function', options);
    try {
      const ports = await Promise.all(Array.from({ length: options.schedulers ?? 1 }, () => freePort()));
      for (const port of ports) stack.scheduler(port, options.schedulerEnv);
      for (let i = 0; i < (options.workers ?? 0); i++) stack.worker(options.workerEnv);
      for (let i = 0; i < (options.apis ?? 0); i++) stack.api(await freePort(), options.apiEnv);
      await Promise.all([...stack.schedulers, ...stack.workers, ...stack.apis].map((s) => s.up));
      return stack;
    } catch (err) {
      await stack.stop();
      throw err;
    }
  }
}

/** Starts a stack (see `Stack`); a stack that does not come up is stopped before the error is thrown. */
export const startServices = <R extends StackRedis = RedisServer>(
  options?: StackOptions<R>,
): Promise<Stack<R>> => Stack.start(options);
