/** Starts the conformance stack and prints the MCP URL; for poking at it by hand. */
import { CONFORMANCE_ENV, startMcpStack } from '@taskline/test-support/mcp-stack';

const stack = await startMcpStack({ env: CONFORMANCE_ENV, fixtures: true });
console.log(stack.replicas[0]!.url);
process.on('SIGINT', () => void stack.stop().then(() => process.exit(0)));
