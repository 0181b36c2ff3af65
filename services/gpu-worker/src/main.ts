import { startWorker } from './start.js';

// The worker as deployed: the built-in tools only.
await startWorker();
