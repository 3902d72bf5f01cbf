/**
 * The spend ledger, written behind: `record()` only appends to a buffer (a request never waits for
 * the database); `flush()` writes the buffer in one transaction every `flush_ms` or when
 * `batch_rows` are waiting: the rows, the names they refer to, and the daily roll-up they add to.
 * A failed flush keeps its rows for the next one; past `max_buffered_rows` the oldest are dropped
 * and counted, never silently. `close()` flushes what is left (SIGTERM loses nothing; SIGKILL at
 * most one flush interval).
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database, NameTable, NewSpend } from './schema.ts';

export interface SpendRecord {
  /** ms since the epoch, when the answer finished */
  at: number;
  key?: string | undefined;
  team?: string | undefined;
  model: string;
  backend?: string | undefined;
  upstreamModel?: string | undefined;
  tokensIn: number;
  tokensOut: number;
  tokensCached: number;
  /** undefined: the serving target has no price */
  costUsd: number | undefined;
  latencyMs: number;
  status: number;
  requestId: string;
}

export interface LedgerOptions {
  /** ms between flushes */
  flushMs: number;
  /** a flush starts at once when this many rows wait */
  batchRows: number;
  /** most rows held while the database is unreachable; the oldest past it are dropped */
  maxBufferedRows: number;
  /** told of rows dropped (the count), for a metric */
  onDropped?: (rows: number) => void;
  /** told of a flush that failed (its rows are kept) */
  onFlushError?: (err: unknown) => void;
}

export interface LedgerStats {
  buffered: number;
  written: number;
  dropped: number;
  failedFlushes: number;
}

type Kind = NameTable['kind'];

const DAY_MS = 86_400_000;
/** rows per INSERT statement: under SQLite's 32,766 bound parameters at 13 columns */
const ROWS_PER_INSERT = 1000;

/** USD → integer micro-USD (sums stay exact); undefined stays unknown. */
export function toMicros(usd: number | undefined): number | null {
  return usd === undefined || !Number.isFinite(usd) ? null : Math.round(usd * 1_000_000);
}

export class SpendLedger {
  private buffer: SpendRecord[] = [];
  private readonly names = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;
  readonly stats: LedgerStats = { buffered: 0, written: 0, dropped: 0, failedFlushes: 0 };

  constructor(
    private readonly db: Kysely<Database>,
    private readonly opts: LedgerOptions,
  ) {
    this.timer = setInterval(() => void this.flush(), opts.flushMs);
    this.timer.unref();
  }

  /** Appends one answered request; never waits and never throws. */
  record(r: SpendRecord): void {
    if (this.closed) return;
    this.buffer.push(r);
    if (this.buffer.length > this.opts.maxBufferedRows) {
      const over = this.buffer.length - this.opts.maxBufferedRows;
      this.buffer.splice(0, over);
      this.stats.dropped += over;
      this.opts.onDropped?.(over);
    }
    this.stats.buffered = this.buffer.length;
    if (this.buffer.length >= this.opts.batchRows && this.flushing === undefined) void this.flush();
  }

  /** Writes what is buffered now (after a flush already running); resolves when done, never rejects. */
  async flush(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
    if (this.buffer.length === 0) return;
    const rows = this.buffer;
    this.buffer = [];
    this.flushing = this.write(rows)
      .then(() => {
        this.stats.written += rows.length;
      })
      .catch((err: unknown) => {
        // kept for the next flush, ahead of what came since, within the bound
        this.stats.failedFlushes++;
        this.buffer = rows.concat(this.buffer);
        const over = this.buffer.length - this.opts.maxBufferedRows;
        if (over > 0) {
          this.buffer.splice(0, over);
          this.stats.dropped += over;
          this.opts.onDropped?.(over);
        }
        this.opts.onFlushError?.(err);
      })
      .finally(() => {
        this.flushing = undefined;
        this.stats.buffered = this.buffer.length;
      });
    await this.flushing;
  }

  /**
   * Deletes ledger rows older than `beforeMs`, a few thousand per statement so no one statement
   * holds the database (or, on SQLite, the event loop) for long; the daily totals stay. Returns
   * the rows deleted.
   */
  async prune(beforeMs: number, dialect: 'sqlite' | 'postgres', chunk = 5000): Promise<number> {
    let total = 0;
    for (;;) {
      const r =
        dialect === 'sqlite'
          ? await sql`delete from spend where rowid in (select rowid from spend where at < ${beforeMs} limit ${chunk})`.execute(this.db)
          : await sql`delete from spend where ctid = any(array(select ctid from spend where at < ${beforeMs} limit ${chunk}))`.execute(this.db);
      const n = Number(r.numAffectedRows ?? 0);
      total += n;
      if (n < chunk) return total;
    }
  }

  /** Stops the timer and writes what is left; resolves true when nothing stayed unwritten. */
  async close(): Promise<boolean> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
    return this.buffer.length === 0;
  }

  private async write(rows: SpendRecord[]): Promise<void> {
    const learned = await this.db.transaction().execute(async (trx) => {
      const { ref, learned } = await this.resolveNames(trx, rows);
      const spend: NewSpend[] = rows.map((r) => ({
        at: r.at,
        key_ref: ref('key', r.key),
        team_ref: ref('team', r.team),
        model_ref: ref('model', r.model) ?? 0,
        backend_ref: ref('backend', r.backend),
        upstream_ref: ref('upstream', r.upstreamModel),
        tokens_in: r.tokensIn,
        tokens_out: r.tokensOut,
        tokens_cached: r.tokensCached,
        cost_micros: toMicros(r.costUsd),
        latency_ms: Math.round(r.latencyMs),
        status: r.status,
        request_id: r.requestId,
      }));
      for (let i = 0; i < spend.length; i += ROWS_PER_INSERT) await trx.insertInto('spend').values(spend.slice(i, i + ROWS_PER_INSERT)).execute();
      await this.rollUp(trx, spend);
      return learned;
    });
    // remembered once committed: a rolled-back insert leaves no number
    for (const [k, id] of learned) this.names.set(k, id);
  }

  /** Adds the rows to their day's totals per key, team and model (0: none). */
  private async rollUp(trx: Transaction<Database>, spend: NewSpend[]): Promise<void> {
    const days = new Map<string, { day: number; key_ref: number; team_ref: number; model_ref: number; requests: number; errors: number; tokens_in: number; tokens_out: number; tokens_cached: number; cost_micros: number }>();
    for (const s of spend) {
      const day = Math.floor(s.at / DAY_MS);
      const k = `${day}:${s.key_ref ?? 0}:${s.team_ref ?? 0}:${s.model_ref}`;
      let d = days.get(k);
      if (!d) days.set(k, (d = { day, key_ref: s.key_ref ?? 0, team_ref: s.team_ref ?? 0, model_ref: s.model_ref, requests: 0, errors: 0, tokens_in: 0, tokens_out: 0, tokens_cached: 0, cost_micros: 0 }));
      d.requests++;
      if (s.status >= 400) d.errors++;
      d.tokens_in += s.tokens_in;
      d.tokens_out += s.tokens_out;
      d.tokens_cached += s.tokens_cached;
      d.cost_micros += s.cost_micros ?? 0;
    }
    const values = [...days.values()];
    for (let i = 0; i < values.length; i += ROWS_PER_INSERT) {
      await trx
        .insertInto('spend_daily')
        .values(values.slice(i, i + ROWS_PER_INSERT))
        .onConflict((oc) =>
          oc.columns(['day', 'key_ref', 'team_ref', 'model_ref']).doUpdateSet((eb) => ({
            requests: eb('spend_daily.requests', '+', eb.ref('excluded.requests')),
            errors: eb('spend_daily.errors', '+', eb.ref('excluded.errors')),
            tokens_in: eb('spend_daily.tokens_in', '+', eb.ref('excluded.tokens_in')),
            tokens_out: eb('spend_daily.tokens_out', '+', eb.ref('excluded.tokens_out')),
            tokens_cached: eb('spend_daily.tokens_cached', '+', eb.ref('excluded.tokens_cached')),
            cost_micros: eb('spend_daily.cost_micros', '+', eb.ref('excluded.cost_micros')),
          })),
        )
        .execute();
    }
  }

  /** The numbers of the rows' names (inserting the new ones), and the numbers learned here. */
  private async resolveNames(trx: Transaction<Database>, rows: SpendRecord[]): Promise<{ ref: (kind: Kind, name: string | undefined) => number | null; learned: Map<string, number> }> {
    const missing = new Map<string, { kind: Kind; name: string }>();
    const want = (kind: Kind, name: string | undefined): void => {
      if (name === undefined) return;
      const k = `${kind}\u0000${name}`;
      if (!this.names.has(k)) missing.set(k, { kind, name });
    };
    for (const r of rows) {
      want('key', r.key);
      want('team', r.team);
      want('model', r.model);
      want('backend', r.backend);
      want('upstream', r.upstreamModel);
    }
    const learned = new Map<string, number>();
    const list = [...missing.values()];
    for (let i = 0; i < list.length; i += ROWS_PER_INSERT) {
      const part = list.slice(i, i + ROWS_PER_INSERT);
      await trx
        .insertInto('names')
        .values(part)
        .onConflict((oc) => oc.columns(['kind', 'name']).doNothing())
        .execute();
      const found = await trx
        .selectFrom('names')
        .select(['id', 'kind', 'name'])
        .where((eb) => eb.or(part.map((n) => eb.and([eb('kind', '=', n.kind), eb('name', '=', n.name)]))))
        .execute();
      for (const f of found) learned.set(`${f.kind}\u0000${f.name}`, f.id);
    }
    const ref = (kind: Kind, name: string | undefined): number | null => {
      if (name === undefined) return null;
      const k = `${kind}\u0000${name}`;
      return this.names.get(k) ?? learned.get(k) ?? null;
    };
    return { ref, learned };
  }
}

/** The utc day number of `ms`. */
export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}
