/**
 * The cache key: a SHA-256 of the canonical JSON (object keys sorted, no insignificant whitespace)
 * of everything that can change the answer — the operation, the cache namespace (the key's name by
 * default, so tenants never see each other's answers), the public model and its configured target
 * list, a backend pin, streaming or not, and the whole request body (messages, tools,
 * response_format, sampling parameters, n, seed, vendor extras, …) minus the few fields that
 * cannot change the answer.
 */
import { createHash } from 'node:crypto';
import type { CacheConfig } from '../config/schema.ts';

/** Fields that never change what the model answers: bookkeeping and delivery options. */
const IGNORED = new Set(['model', 'stream', 'stream_options', 'user', 'safety_identifier', 'metadata', 'store', 'prompt_cache_key', 'service_tier']);

/** JSON with object keys sorted at every level; `undefined` members are left out as JSON.stringify does. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? 'null' : canonicalJson(x))).join(',')}]`;
  const obj = v as Record<string, unknown>;
  const parts: string[] = [];
  for (const k of Object.keys(obj).sort()) {
    const x = obj[k];
    if (x === undefined || typeof x === 'function') continue;
    parts.push(`${JSON.stringify(k)}:${canonicalJson(x)}`);
  }
  return `{${parts.join(',')}}`;
}

export interface KeyParts {
  op: 'chat' | 'completions' | 'embeddings' | 'responses' | 'messages';
  namespace: string;
  model: string;
  /** the model's configured targets, "backend/model" in config order */
  targets: readonly string[];
  pin: string | undefined;
  stream: boolean;
  body: Record<string, unknown>;
}

export function cacheKey(p: KeyParts): string {
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p.body)) {
    // a top-level null means "the default", the same as leaving the field out
    if (IGNORED.has(k) || v === null || v === undefined) continue;
    body[k] = v;
  }
  const canon = canonicalJson({ v: 1, op: p.op, ns: p.namespace, model: p.model, targets: p.targets, pin: p.pin ?? null, stream: p.stream, body });
  return createHash('sha256').update(canon).digest('hex');
}

export type CacheDecision = { use: false; why: 'disabled' | 'no-store' | 'temperature' } | { use: true; read: boolean };

/** Cache-Control directives a client may send (lower-cased tokens). */
export function cacheDirectives(header: string | undefined): { noCache: boolean; noStore: boolean } {
  // most requests send none (splitting an empty text took a runtime call)
  if (header === undefined || header === '') return { noCache: false, noStore: false };
  const tokens = header.toLowerCase().split(',').map((t) => t.trim().split('=')[0]);
  return { noCache: tokens.includes('no-cache'), noStore: tokens.includes('no-store') };
}

/**
 * Whether a request may use the cache: never with `no-store`; generation only when sampling is
 * deterministic (temperature 0) unless `cache_nonzero_temperature` — an absent temperature is the
 * vendor's default of 1. `no-cache` skips the lookup but stores the fresh answer (a refresh).
 */
export function decide(cfg: CacheConfig, op: KeyParts['op'], body: { temperature?: number | null | undefined }, cc: { noCache: boolean; noStore: boolean }): CacheDecision {
  if (!cfg.enabled) return { use: false, why: 'disabled' };
  if (cc.noStore) return { use: false, why: 'no-store' };
  if (op !== 'embeddings' && !cfg.cache_nonzero_temperature && (body.temperature ?? 1) > 0) return { use: false, why: 'temperature' };
  return { use: true, read: !cc.noCache };
}
