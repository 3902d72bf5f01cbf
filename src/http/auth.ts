/**
 * Bearer-key auth. Keys are kept only as SHA-256 digests; a presented key is hashed and compared
 * with `timingSafeEqual`, so neither the key nor its prefix can be learned from timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { KeyConfig } from '../config/schema.ts';
import { unauthorized } from '../errors.ts';
import type { AppEnv } from './types.ts';

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export function authMiddleware(keys: readonly KeyConfig[] | undefined): MiddlewareHandler<AppEnv> {
  if (!keys) return async (_c, next) => next();
  const byDigest = new Map<string, { name: string; digest: Buffer }>();
  for (const k of keys) {
    const d = digest(k.key);
    byDigest.set(d.toString('hex'), { name: k.name, digest: d });
  }
  return async (c, next) => {
    const h = c.req.header('authorization');
    if (!h) {
      throw unauthorized("You didn't provide an API key. Send it in the Authorization header as 'Bearer <key>'.");
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
    if (!m?.[1]) throw unauthorized("The Authorization header must be 'Bearer <key>'.");
    const d = digest(m[1]);
    const found = byDigest.get(d.toString('hex'));
    if (!found || !timingSafeEqual(found.digest, d)) throw unauthorized('Incorrect API key provided.');
    c.set('keyName', found.name);
    c.get('log').key = found.name;
    await next();
  };
}
