/** Starts the local stack and prints the MCP URL; for poking at it by hand. */
import { startStack } from './stack.js';

const stack = await startStack();
console.log(stack.replica.url);
process.on('SIGINT', () => void stack.stop().then(() => process.exit(0)));
