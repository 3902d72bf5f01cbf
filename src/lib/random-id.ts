/**
 * Random text for ids (responses, items, messages, requests): bytes from the CSPRNG, drawn from one
 * buffer refilled a few KiB at a time. Hot path: several ids per request; one system call per id
 * (randomBytes) or per UUID batch costs more than the id's whole use.
 */
import { randomFillSync } from 'node:crypto';

const pool = Buffer.allocUnsafe(4096);
let at = pool.length;

function take(n: number): number {
  if (at + n > pool.length) {
    randomFillSync(pool);
    at = 0;
  }
  const from = at;
  at += n;
  return from;
}

/** `bytes` random bytes as lowercase hex (2 digits a byte); at most 4096 bytes. */
export function randomHex(bytes: number): string {
  const from = take(bytes);
  return pool.toString('hex', from, from + bytes);
}

/** `bytes` random bytes as base64url (no padding); at most 4096 bytes. */
export function randomBase64url(bytes: number): string {
  const from = take(bytes);
  return pool.toString('base64url', from, from + bytes);
}
