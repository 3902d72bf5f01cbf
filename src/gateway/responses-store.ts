/**
 * Stored responses of the OpenAI Responses API (`store` ≠ false): what `previous_response_id`,
 * `GET /v1/responses/{id}`, `GET /v1/responses/{id}/input_items` and `DELETE /v1/responses/{id}`
 * read. Kept in the StateStore as blobs, so on Redis any replica answers for any other.
 *
 * API (for the conversations, gateway/conversations.ts, and the stored-responses routes):
 *   new ResponsesStore(stateStore, { ttlSeconds, maxEntryBytes, maxTotalBytes })
 *   put(owner, id, rec)    → { stored: true, bytes } | { stored: false, reason: 'too_large' | 'unavailable', bytes }
 *                            (log a warning when not stored; the client's answer is unaffected)
 *   get(owner, id)         → StoredResponse | undefined   (unknown, expired, or another owner's: undefined → 404)
 *   delete(owner, id)      → true when it existed          (false → 404); its item index entries go too
 *   resolveItems(owner, ids) → Map<id, item>                (for `item_reference`: ids absent from it → 404)
 *   Redis unreachable and the answer unknown: get/delete/resolveItems throw 503 `state_unavailable` (retryable).
 * Helpers: `inputItemsOf(input)` (a request's `input` → items with ids, as `input_items` lists
 * them), `nextHistory(previous, input, output)` (the history to store), and
 * `listInputItems(rec, query)` (the `input_items` list object with its pagination).
 *
 * `owner` is the API key's name ('anonymous' without keys); it is part of the storage key, so one
 * owner can neither read nor delete another's responses. Bounds: an entry (its JSON, the whole
 * conversation's history included) over `maxEntryBytes` is not stored; in memory all entries
 * together stay under `maxTotalBytes` (least recently used go first) and each lives `ttlSeconds`;
 * on Redis each key expires after `ttlSeconds` and the total is Redis's own `maxmemory`.
 *
 * Item index (`item_reference`): put() also writes, per item of the response that has an id (its
 * output items, then its input items; item references themselves excluded; at most
 * MAX_INDEXED_ITEMS), a small blob `ritem:<owner>:<item id>` → the response id, with the same TTL
 * and in the same blob store, so in memory it counts against the same `maxTotalBytes` (and may be
 * evicted like an entry) and on Redis against `maxmemory`. resolveItems() reads the index, then
 * the responses it names, and takes the item from the response itself: an item lives exactly as long
 * as a response that holds it (deleted, expired or evicted → unknown), and an owner only sees its own
 * index. An id held by several responses (an item sent again as input) points to the latest one
 * stored. Lookups are issued together (concurrent commands: one round trip on Redis).
 */
import { randomHex } from '../lib/random-id.ts';
import type { StateStore } from '../state/store/contract.ts';

export interface StoredResponse {
  /** the Response object as served (status, output, usage…) */
  response: Record<string, unknown>;
  /** this turn's input items, each an object with an `id` (inputItemsOf) */
  inputItems: unknown[];
  /** the whole conversation up to and including this response's output (nextHistory) */
  history: unknown[];
}

export interface ResponsesStoreOptions {
  ttlSeconds: number;
  /** larger entries are not stored */
  maxEntryBytes: number;
  /** in memory: most bytes across all entries */
  maxTotalBytes: number;
}

export type PutResult = { stored: true; bytes: number } | { stored: false; reason: 'too_large' | 'unavailable'; bytes: number };

interface StoredEntry {
  v: 1;
  owner: string;
  response: Record<string, unknown>;
  input_items: unknown[];
  history: unknown[];
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Most items of one response written to the item index (output items first, then input items). */
export const MAX_INDEXED_ITEMS = 1000;

interface IndexEntry {
  v: 1;
  owner: string;
  response_id: string;
}

/** The items of a stored response that `item_reference` may name: output first, then input; references excluded. */
function indexedItems(rec: StoredResponse): Array<Record<string, unknown> & { id: string }> {
  const out: Array<Record<string, unknown> & { id: string }> = [];
  const seen = new Set<string>();
  const output = Array.isArray(rec.response.output) ? rec.response.output : [];
  for (const it of [...output, ...rec.inputItems]) {
    if (out.length >= MAX_INDEXED_ITEMS) break;
    if (!isRecord(it) || typeof it.id !== 'string' || it.id === '' || it.type === 'item_reference' || seen.has(it.id)) continue;
    seen.add(it.id);
    out.push(it as Record<string, unknown> & { id: string });
  }
  return out;
}

export class ResponsesStore {
  constructor(
    private readonly store: StateStore,
    readonly opts: ResponsesStoreOptions,
  ) {
    store.blobLimit(opts.maxTotalBytes);
  }

  /** Storage key: `resp:<owner>:<id>`, the owner escaped so no two (owner, id) pairs collide. */
  private key(owner: string, id: string): string {
    return `resp:${encodeURIComponent(owner)}:${id}`;
  }

  /** Item index key: `ritem:<owner>:<item id>` (owner escaped as in `key`). */
  private itemKey(owner: string, itemId: string): string {
    return `ritem:${encodeURIComponent(owner)}:${itemId}`;
  }

  async put(owner: string, id: string, rec: StoredResponse): Promise<PutResult> {
    const value = JSON.stringify({ v: 1, owner, response: rec.response, input_items: rec.inputItems, history: rec.history } satisfies StoredEntry);
    const bytes = Buffer.byteLength(value);
    if (bytes > this.opts.maxEntryBytes) return { stored: false, reason: 'too_large', bytes };
    const ttlMs = this.opts.ttlSeconds * 1000;
    const ok = await this.store.blobSet(this.key(owner, id), value, ttlMs);
    if (!ok) return { stored: false, reason: 'unavailable', bytes };
    // after the entry: in memory the index entries are then evicted after it, never before
    const pointer = JSON.stringify({ v: 1, owner, response_id: id } satisfies IndexEntry);
    await Promise.all(indexedItems(rec).map((it) => this.store.blobSet(this.itemKey(owner, it.id), pointer, ttlMs)));
    return { stored: true, bytes };
  }

  /** The response id an owner's item index names for an item id. */
  private async pointer(owner: string, itemId: string): Promise<string | undefined> {
    const raw = await this.store.blobGet(this.itemKey(owner, itemId));
    if (raw === undefined) return undefined;
    try {
      const r: unknown = JSON.parse(raw);
      return isRecord(r) && r.v === 1 && r.owner === owner && typeof r.response_id === 'string' ? r.response_id : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The items of this owner's stored responses named by `ids` (for `item_reference`), taken from the
   * response that holds them. An id that is unknown, expired, deleted or another owner's is absent.
   */
  async resolveItems(owner: string, ids: readonly string[]): Promise<Map<string, Record<string, unknown>>> {
    const found = new Map<string, Record<string, unknown>>();
    const unique = [...new Set(ids)];
    if (unique.length === 0) return found;
    const pointers = await Promise.all(unique.map((itemId) => this.pointer(owner, itemId)));
    const responseIds = [...new Set(pointers.filter((p): p is string => p !== undefined))];
    const recs = await Promise.all(responseIds.map((rid) => this.get(owner, rid)));
    const byResponse = new Map<string, Map<string, Record<string, unknown>>>();
    responseIds.forEach((rid, i) => {
      const rec = recs[i];
      if (rec) byResponse.set(rid, new Map(indexedItems(rec).map((it) => [it.id, it])));
    });
    unique.forEach((itemId, i) => {
      const rid = pointers[i];
      const item = rid === undefined ? undefined : byResponse.get(rid)?.get(itemId);
      if (item) found.set(itemId, item);
    });
    return found;
  }

  async get(owner: string, id: string): Promise<StoredResponse | undefined> {
    const raw = await this.store.blobGet(this.key(owner, id));
    if (raw === undefined) return undefined;
    let r: unknown;
    try {
      r = JSON.parse(raw);
    } catch {
      return undefined;
    }
    if (!isRecord(r) || r.v !== 1 || r.owner !== owner || !isRecord(r.response) || !Array.isArray(r.input_items) || !Array.isArray(r.history)) {
      return undefined;
    }
    return { response: r.response, inputItems: r.input_items, history: r.history };
  }

  async delete(owner: string, id: string): Promise<boolean> {
    let rec: StoredResponse | undefined;
    try {
      rec = await this.get(owner, id);
    } catch {
      // unreadable now: the index entries stay, and point to nothing once the entry is gone
    }
    const deleted = await this.store.blobDelete(this.key(owner, id));
    if (rec) await this.unindex(owner, id, indexedItems(rec).map((it) => it.id));
    return deleted;
  }

  /** Removes the index entries that still point to response `id` (another response may hold the item since). */
  private async unindex(owner: string, id: string, itemIds: readonly string[]): Promise<void> {
    await Promise.all(
      itemIds.map(async (itemId) => {
        try {
          if ((await this.pointer(owner, itemId)) === id) await this.store.blobDelete(this.itemKey(owner, itemId));
        } catch {
          // best effort: a pointer left behind names a response that no longer exists (unknown)
        }
      }),
    );
  }
}

const ID_PREFIX: Record<string, string> = {
  message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  custom_tool_call: 'ctc',
  custom_tool_call_output: 'ctco',
  reasoning: 'rs',
};

function itemId(type: string): string {
  return `${ID_PREFIX[type] ?? 'item'}_${randomHex(24)}`;
}

/**
 * A request's `input` as `input_items` lists it: a string is one user message; an item without
 * `type` that has a `role` is a message; a message's string content becomes one `input_text` part
 * (`output_text` for an assistant); every item gets an `id` when it has none.
 */
export function inputItemsOf(input: unknown): Array<Record<string, unknown>> {
  if (input === undefined || input === null) return [];
  const items: unknown[] = typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : Array.isArray(input) ? input : [];
  const out: Array<Record<string, unknown>> = [];
  for (const raw of items) {
    if (!isRecord(raw)) continue;
    const type = typeof raw.type === 'string' ? raw.type : 'role' in raw ? 'message' : 'item_reference';
    const item: Record<string, unknown> = { ...raw, type };
    if (type === 'message') {
      if (typeof item.content === 'string') {
        item.content = [item.role === 'assistant' ? { type: 'output_text', text: item.content, annotations: [] } : { type: 'input_text', text: item.content }];
      }
      item.status ??= 'completed';
    }
    if (typeof item.id !== 'string' || item.id === '') item.id = itemId(type);
    out.push(item);
  }
  return out;
}

/**
 * The conversation to store with a response: the previous response's history, this turn's input as
 * the client sent it (a string as one user message), then the response's output items.
 */
export function nextHistory(previous: StoredResponse | undefined, input: unknown, output: readonly unknown[]): unknown[] {
  const turn = typeof input === 'string' ? [{ role: 'user', content: input }] : Array.isArray(input) ? input : [];
  return [...(previous?.history ?? []), ...turn, ...output];
}

export interface InputItemsQuery {
  /** an item id: list the items after it in the chosen order */
  after?: string | undefined;
  /** an item id: list the items before it in the chosen order */
  before?: string | undefined;
  /** 1–100, default 20 */
  limit?: number | undefined;
  /** default desc (newest first), as OpenAI */
  order?: 'asc' | 'desc' | undefined;
}

export interface InputItemsList {
  object: 'list';
  data: unknown[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/** `GET /v1/responses/{id}/input_items`: the stored input items, paged as OpenAI pages them. */
export function listInputItems(rec: StoredResponse, q: InputItemsQuery = {}): InputItemsList {
  const limit = Math.min(100, Math.max(1, Math.trunc(q.limit ?? 20)));
  let items = q.order === 'asc' ? [...rec.inputItems] : [...rec.inputItems].reverse();
  const idOf = (it: unknown): string | undefined => (isRecord(it) && typeof it.id === 'string' ? it.id : undefined);
  if (q.after !== undefined) {
    const i = items.findIndex((it) => idOf(it) === q.after);
    items = i < 0 ? [] : items.slice(i + 1);
  }
  if (q.before !== undefined) {
    const i = items.findIndex((it) => idOf(it) === q.before);
    items = i < 0 ? [] : items.slice(0, i);
  }
  const data = items.slice(0, limit);
  return {
    object: 'list',
    data,
    first_id: idOf(data[0]) ?? null,
    last_id: idOf(data[data.length - 1]) ?? null,
    has_more: items.length > limit,
  };
}
