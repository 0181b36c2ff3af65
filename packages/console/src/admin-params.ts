/** The admin API's query and path parameters: bounded integers and patterned strings, or `invalid_request`. */
import { TasklineError } from '@taskline/engine';

export const intParam = (
  value: unknown,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number => {
  if (value === undefined || value === '') return fallback;
  // Decimal digits only, as resume points are: Number() would also take '1e2', '0x10' or ' 5'.
  const n = typeof value === 'string' && /^(0|[1-9][0-9]{0,14})$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max))
    throw new TasklineError('invalid_request', `${name} must be an integer from ${min} to ${max}.`);
  return n;
};

export const strParam = (value: unknown, name: string, pattern: RegExp): string | undefined => {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string' || !pattern.test(value))
    throw new TasklineError('invalid_request', `${name} is not valid.`);
  return value;
};
