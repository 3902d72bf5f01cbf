/**
 * Bearer-key auth. Keys are kept only as SHA-256 digests; a presented key is hashed and compared
 * with `timingSafeEqual`, so neither the key nor its prefix can be learned from timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { KeyConfig } from '../config/schema.ts';
import { GatewayError, unauthorized } from '../errors/gateway-error.ts';
import type { Guard } from './route-table.ts';

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/**
 * The operator surface (/metrics, /status, /). With an admin key configured it must be presented;
 * without one it is open only when the gateway has no client keys either (a local, keyless setup),
 * so turning on client auth never leaves the operator pages open by accident. Undefined: open.
 */
export function adminGuard(
  admin: { key?: string | undefined } | undefined,
  clientKeys: readonly KeyConfig[] | undefined,
  opts: { open?: boolean; browser?: boolean } = {},
): Guard | undefined {
  if (opts.open) return undefined;
  const want = admin?.key ? digest(admin.key) : undefined;
  if (!want) {
    if (!clientKeys) return undefined;
    return () => {
      throw new GatewayError('admin_disabled');
    };
  }
  return (x) => {
    const presented = adminCredential(x.header('authorization'));
    if (presented === undefined) {
      const e = unauthorized('This endpoint needs the admin key: Authorization: Bearer <admin key>.');
      // A browser shows a login prompt for this; the password is the admin key.
      if (opts.browser) e.headers = { ...e.headers, 'www-authenticate': 'Basic realm="switchyard admin", charset="UTF-8"' };
      throw e;
    }
    const d = digest(presented);
    if (d.length !== want.length || !timingSafeEqual(d, want)) throw unauthorized('Incorrect admin key provided.');
  };
}

/** The admin key from `Bearer <key>` or from HTTP Basic (any user name, the key as password). */
function adminCredential(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer?.[1]) return bearer[1];
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!basic?.[1]) return undefined;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && colon < decoded.length - 1 ? decoded.slice(colon + 1) : undefined;
}

/**
 * Checks the client's key (throws 401) and records its name; undefined when the gateway has no
 * client keys. The key comes as `Authorization: Bearer <key>`; on Anthropic's routes (the request's
 * envelope is Anthropic's) also as `x-api-key: <key>`, which wins when both are sent, as Anthropic's
 * SDKs send one or the other. Synchronous: it runs in the API's guard (api.ts).
 */
export function keyCheck(keys: readonly KeyConfig[] | undefined): Guard | undefined {
  if (!keys) return undefined;
  const byDigest = new Map<string, { name: string; digest: Buffer }>();
  for (const k of keys) {
    // `key_sha256` configs hold only the digest; load.ts guarantees exactly one of the two
    const d = k.key !== undefined ? digest(k.key) : Buffer.from(k.key_sha256 ?? '', 'hex');
    byDigest.set(d.toString('hex'), { name: k.name, digest: d });
  }
  return (x) => {
    const anthropic = x.envelope === 'anthropic';
    const apiKey = anthropic ? x.header('x-api-key')?.trim() : undefined;
    let presented: string;
    if (apiKey) {
      presented = apiKey;
    } else {
      const h = x.header('authorization');
      if (!h) {
        throw unauthorized(
          anthropic
            ? "You didn't provide an API key. Send it in the x-api-key header, or in the Authorization header as 'Bearer <key>'."
            : "You didn't provide an API key. Send it in the Authorization header as 'Bearer <key>'.",
        );
      }
      const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
      if (!m?.[1]) throw unauthorized("The Authorization header must be 'Bearer <key>'.");
      presented = m[1];
    }
    const d = digest(presented);
    const found = byDigest.get(d.toString('hex'));
    if (!found || !timingSafeEqual(found.digest, d)) throw unauthorized('Incorrect API key provided.');
    x.keyName = found.name;
    x.log.key = found.name;
  };
}
