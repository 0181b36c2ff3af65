// The api's entry as deployed.
import { startApi } from './start.js';

// The api as deployed: nothing beyond the built-in tools on `/mcp`.
startApi();
