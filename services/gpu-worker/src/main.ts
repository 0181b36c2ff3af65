// The gpu-worker's entry as deployed.
import { exitOnStartFailure } from '@taskline/log';
import { startWorker } from './start.js';

// The worker as deployed: the built-in tools only.
exitOnStartFailure('gpu-worker', () => startWorker());
