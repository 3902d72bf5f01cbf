/**
 * Cached answers on top of the StateStore (in memory, or Redis shared by replicas). An entry is
 * one JSON string: who served it, when, and either the JSON answer or the stream's chunks in order
 * (replayed as SSE on a hit). Errors are never stored; answers over `max_entry_bytes` are skipped.
 */
import type { CacheConfig } from '../config/schema.ts';
import { RawEmbeddingResponse } from '../protocol/embeddings/schema.ts';
import type { StateStore } from '../state/store/contract.ts';

export interface EntryMeta {
  /** epoch ms when stored */
  at: number;
  backend: string;
  model: string;
}
export type Entry = (EntryMeta & { kind: 'json'; body: unknown }) | (EntryMeta & { kind: 'stream'; chunks: unknown[] });

/** Writes an entry elsewhere than the store's cacheSet (a shared flight's release carries it). */
export type CacheWrite = (text: string, ttlMs: number) => void;

export interface CacheStats {
  hits: number;
  misses: number;
  bypasses: number;
  coalesced: number;
  stored: number;
  too_large: number;
}

export class ResponseCache {
  readonly stats: CacheStats = { hits: 0, misses: 0, bypasses: 0, coalesced: 0, stored: 0, too_large: 0 };

  constructor(
    private readonly store: StateStore,
    readonly cfg: CacheConfig,
    private readonly now: () => number = Date.now,
  ) {}

  async get(key: string): Promise<Entry | undefined> {
    const raw = await this.store.cacheGet(key);
    return raw === undefined ? undefined : this.parse(raw);
  }

  /** An entry's text (stored, or a shared flight's JSON answer) as the entry. */
  parse(raw: string): Entry | undefined {
    try {
      const e = JSON.parse(raw) as Entry;
      return e.kind === 'json' || e.kind === 'stream' ? e : undefined;
    } catch {
      return undefined;
    }
  }

  /** Stores a JSON answer (serialised now, so later changes to `body` do not leak in). */
  putJson(key: string, meta: Omit<EntryMeta, 'at'>, body: unknown): void {
    this.write(key, this.jsonText(meta, body));
  }

  /** A JSON answer's entry text. */
  jsonText(meta: Omit<EntryMeta, 'at'>, body: unknown): string {
    if (body instanceof RawEmbeddingResponse) {
      // checked upstream JSON: spliced in as it came instead of parsed and printed again
      const head = JSON.stringify({ kind: 'json', at: this.now(), backend: meta.backend, model: meta.model });
      return `${head.slice(0, -1)},"body":${body.bytes.toString('utf8')}}`;
    }
    return JSON.stringify({ kind: 'json', at: this.now(), backend: meta.backend, model: meta.model, body });
  }

  /** Stores an entry's text (jsonText's); with `via`, the write is `via`'s (told the text and TTL), not the store's. */
  putText(key: string, text: string, via?: CacheWrite): void {
    this.write(key, text, via);
  }

  /** Stores a stream from its chunks, each already serialised (with `via`, as putText). */
  putStream(key: string, meta: Omit<EntryMeta, 'at'>, chunks: readonly string[], via?: CacheWrite): void {
    const head = JSON.stringify({ kind: 'stream', at: this.now(), backend: meta.backend, model: meta.model });
    this.write(key, `${head.slice(0, -1)},"chunks":[${chunks.join(',')}]}`, via);
  }

  private write(key: string, value: string, via?: CacheWrite): void {
    if (value.length > this.cfg.max_entry_bytes) {
      this.stats.too_large++;
      return;
    }
    this.stats.stored++;
    if (via) via(value, this.cfg.ttl_seconds * 1000);
    else void this.store.cacheSet(key, value, this.cfg.ttl_seconds * 1000).catch(() => {});
  }

  /** Whole seconds since the entry was stored (the `age` header). */
  age(e: Entry): number {
    return Math.max(0, Math.floor((this.now() - e.at) / 1000));
  }
}
