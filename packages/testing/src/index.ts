export { startRedis, type RedisServer, type RedisServerOptions } from './redis.js';
export { freePort } from './ports.js';
export { bounded, until } from './wait.js';
export { monitorRedis, monitorArgs, type RedisMonitor } from './monitor.js';
