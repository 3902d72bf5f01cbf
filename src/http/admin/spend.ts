/**
 * GET /admin/spend?by=key|team|model&since=…&until=…&limit=…: spend per key, team or model over
 * whole UTC days, most spent first, from the ledger's daily totals (the buffered rows are written
 * first, so every request answered before this one is counted). `since` and `until` are dates or
 * times (ISO 8601) or a span back from now (`7d`, `24h`); by default the last 30 days.
 */
import { GatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import { spendTotals, type SpendBy } from '../../db/spend.ts';
import type { GenerationDeps } from '../deps.ts';
import { sendJson } from '../direct.ts';
import type { ApiHandler } from '../route-table.ts';

const BY: readonly SpendBy[] = ['key', 'team', 'model'];
const SPAN = /^(\d{1,5})([dh])$/;
const DAY_MS = 86_400_000;

/** A time parameter: ISO 8601, or a span back from `now`; throws a 400 naming it. */
export function timeParam(value: string | null, name: string, fallback: number, now: number): number {
  if (value === null || value === '') return fallback;
  const span = SPAN.exec(value);
  if (span) return now - Number(span[1]) * (span[2] === 'd' ? DAY_MS : 3_600_000);
  const t = Date.parse(value);
  if (!Number.isFinite(t)) throw invalidRequest(`${name} must be an ISO 8601 date or time, or a span such as 7d or 24h; got ${JSON.stringify(value.slice(0, 64))}.`, name);
  return t;
}

const day = (ms: number): string => new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);

export function spendHandler(deps: GenerationDeps): ApiHandler {
  return async (x) => {
    const q = x.query();
    const by = (q.get('by') ?? 'key') as SpendBy;
    if (!BY.includes(by)) throw invalidRequest(`by must be one of ${BY.join(', ')}.`, 'by');
    const now = Date.now();
    const since = timeParam(q.get('since'), 'since', now - 30 * DAY_MS, now);
    const until = timeParam(q.get('until'), 'until', now, now);
    if (until < since) throw invalidRequest('until is before since.', 'until');
    const limitText = q.get('limit');
    const limit = limitText === null ? 100 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw invalidRequest('limit must be an integer from 1 to 10000.', 'limit');
    const { database, ledger } = deps.records;
    if (database === undefined) throw new GatewayError('not_ready', 'The gateway has not opened its database yet.');
    await ledger?.flush();
    const rows = await spendTotals(database.db, by, since, until, limit);
    x.out['cache-control'] = 'no-store';
    sendJson(
      x,
      200,
      {
        object: 'list',
        by,
        since: day(since),
        until: day(until),
        data: rows.map((r) => ({ [by]: r.name, requests: r.requests, errors: r.errors, tokens_in: r.tokens_in, tokens_out: r.tokens_out, tokens_cached: r.tokens_cached, cost_usd: r.cost_usd })),
      },
      deps.config.server.send_timeout_ms,
    );
  };
}
