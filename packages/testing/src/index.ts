export { startRedis, type RedisServer, type RedisServerOptions } from './redis.js';
export { freePort } from './ports.js';
export { until } from './wait.js';
export { monitorRedis, monitorArgs, type RedisMonitor } from './monitor.js';
export { startRedisCluster, type RedisCluster, type RedisClusterOptions } from './redis-cluster.js';
