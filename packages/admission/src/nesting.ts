/**
 * How deep a request body may nest, on every protocol edge. Recursive work on a body (the MCP
 * SDK's validation, storing it as JSON, an idempotency fingerprint) overflows the stack on
 * hostile depths, which would answer a 500; real requests stay far below.
 */
export const MAX_NESTING = 64;

/** Iterative, so that measuring a hostile body cannot itself overflow the stack. */
export function nestedDeeperThan(value: unknown, limit = MAX_NESTING): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}
