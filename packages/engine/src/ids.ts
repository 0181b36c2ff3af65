import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

/** `<prefix>_` + 26 base32 characters: 130 bits, of which 128 are random. */
export function newId(prefix: string): string {
  const bytes = randomBytes(17);
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
