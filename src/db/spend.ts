/**
 * Spend read back from the daily roll-up (never from the raw ledger): totals per key, team or
 * model over whole UTC days, and one key's or team's spend since a period's start, which is what
 * budgets are charged from.
 */
import type { Kysely } from 'kysely';
import { dayOf } from './ledger.ts';
import type { Database } from './schema.ts';

export type SpendBy = 'key' | 'team' | 'model';

export interface SpendTotal {
  /** the key's, team's or model's name; null: requests without one (no client keys, no team) */
  name: string | null;
  requests: number;
  errors: number;
  tokens_in: number;
  tokens_out: number;
  tokens_cached: number;
  cost_usd: number;
}

const COLUMN = { key: 'key_ref', team: 'team_ref', model: 'model_ref' } as const;

/**
 * Totals per `by` over the UTC days from `sinceMs`'s to `untilMs`'s (both included), most spent
 * first; at most `limit` of them.
 */
export async function spendTotals(db: Kysely<Database>, by: SpendBy, sinceMs: number, untilMs: number, limit = 1000): Promise<SpendTotal[]> {
  const col = COLUMN[by];
  const rows = await db
    .selectFrom('spend_daily as d')
    .leftJoin('names as n', (j) => j.onRef('n.id', '=', `d.${col}`).on('n.kind', '=', by))
    .select((eb) => [
      'n.name as name',
      eb.fn.sum<number>('d.requests').as('requests'),
      eb.fn.sum<number>('d.errors').as('errors'),
      eb.fn.sum<number>('d.tokens_in').as('tokens_in'),
      eb.fn.sum<number>('d.tokens_out').as('tokens_out'),
      eb.fn.sum<number>('d.tokens_cached').as('tokens_cached'),
      eb.fn.sum<number>('d.cost_micros').as('cost_micros'),
    ])
    .where('d.day', '>=', dayOf(sinceMs))
    .where('d.day', '<=', dayOf(untilMs))
    .groupBy(['n.name', `d.${col}`])
    .orderBy('cost_micros', 'desc')
    .orderBy('requests', 'desc')
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    name: r.name ?? null,
    requests: Number(r.requests),
    errors: Number(r.errors),
    tokens_in: Number(r.tokens_in),
    tokens_out: Number(r.tokens_out),
    tokens_cached: Number(r.tokens_cached),
    cost_usd: Number(r.cost_micros) / 1_000_000,
  }));
}

/** USD a key or a team spent from the UTC day of `sinceMs` on (a budget period's start). */
export async function spentSince(db: Kysely<Database>, kind: 'key' | 'team', name: string, sinceMs: number): Promise<number> {
  const r = await db
    .selectFrom('spend_daily as d')
    .innerJoin('names as n', (j) => j.onRef('n.id', '=', kind === 'key' ? 'd.key_ref' : 'd.team_ref').on('n.kind', '=', kind))
    .select((eb) => eb.fn.sum<number>('d.cost_micros').as('cost_micros'))
    .where('n.name', '=', name)
    .where('d.day', '>=', dayOf(sinceMs))
    .executeTakeFirst();
  return Number(r?.cost_micros ?? 0) / 1_000_000;
}
