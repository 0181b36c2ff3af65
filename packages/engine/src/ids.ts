// Task and response ids: random, prefixed, checked for shape before any Redis look-up.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

const ID_BYTES = 17;
/** Random bytes drawn 256 ids at a time: one CSPRNG call per id cost more than the rest of a create's CPU. */
let pool = Buffer.alloc(0);
let poolAt = 0;

/** `<prefix>_` + 26 base32 characters: 130 bits, of which 128 are random. */
export function newId(prefix: string): string {
  if (poolAt + ID_BYTES > pool.length) {
    pool = randomBytes(ID_BYTES * 256);
    poolAt = 0;
  }
  const bytes = pool.subarray(poolAt, poolAt + ID_BYTES);
  poolAt += ID_BYTES;
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 26) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return `${prefix}_${out}`;
}

const ID_PATTERN = /^[a-z]+_[0-9a-hjkmnp-tv-z]{26}$/;

/** True for ids this service could have made; anything else is an unknown id without a Redis look-up. */
export function isWellFormedId(value: string, prefix: string): boolean {
  return value.startsWith(`${prefix}_`) && ID_PATTERN.test(value);
}
