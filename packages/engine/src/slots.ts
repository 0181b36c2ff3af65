/**
 * Redis Cluster's hash slot of a key (CRC16-XMODEM of the key, or of its `{hash tag}`, mod 16384),
 * as the Redis Cluster specification defines it ("Keys distribution model"): which node owns what
 * a script wrote, so that `WAIT` goes to that node.
 */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key, 'utf8')) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
