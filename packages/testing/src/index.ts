// The face of @taskline/testing: Redis servers and clusters, service stacks, proxies, waits.
export { startRedis, startReplica, type RedisServer, type RedisServerOptions } from './redis.js';
export { freePort, ipv6Loopback } from './ports.js';
export { configSetAll, flushAll, scanKeys } from './keys.js';
export { bounded, exited, until } from './wait.js';
export { monitorRedis, monitorArgs, type RedisMonitor } from './monitor.js';
export { startRedisCluster, type RedisCluster, type RedisClusterOptions } from './redis-cluster.js';
export {
  LOADED_MODULES_PRELOAD,
  ROOT,
  Service,
  SERVICE_NODE,
  TEST_CONTROL_ENV,
  TEST_CONTROL_TOKEN,
  type ServiceKind,
  type ServiceOptions,
} from './service.js';
export {
  ApiService,
  Stack,
  startServices,
  type RedisSource,
  type StackOptions,
  type StackRedis,
  type StartOptions,
} from './stack.js';
export { startHaproxy, type LoadBalancer } from './haproxy.js';
export { LONG } from './fixtures.js';
export { skewedClock } from './skew.js';
export { runsScript, startRedisProxy, type RedisCommand, type RedisProxy } from './redis-proxy.js';
