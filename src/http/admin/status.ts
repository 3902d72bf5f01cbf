/**
 * GET /status (JSON) and GET / (the same as a small HTML page for humans, refreshed every 5 s):
 * each public model with its targets' breaker state (open until when, last error), measured
 * latency of successful calls and recent error rate, the latency policy's score (labelled as a
 * score), backend load status, requests in flight; then the cache and key sections. Served behind
 * the admin guard (see auth.ts); the page also accepts HTTP Basic credentials (any user name, the
 * admin key as password) so a browser can open it. Everything the page shows is escaped.
 *
 * JSON fields per target that changed meaning (they misreported): `error_rate` is now the share of
 * failed calls over the recent window (`calls`), failures that opened the breaker included; the
 * breaker's own window rate (emptied when it opens) is `breaker_window_failure_rate`. `latency_ms`
 * and `ttft_ms` were the latency policy's penalised averages: they are `latency_score_ms` and
 * `ttft_score_ms` now, and measured percentiles are in `latency` and `ttft`.
 */
import type { GenerationDeps } from '../deps.ts';
import { sendBody } from '../direct.ts';
import type { ApiHandler } from '../route-table.ts';
import type { LastError, Percentiles } from '../../router/stats.ts';
import type { CacheSection, KeysSection, KeyStatus, KeyUsage } from './status-extras.ts';

interface TargetStatus {
  backend: string;
  model: string;
  backend_status: string;
  breaker: string;
  /** ISO time the open period ends; null unless open */
  breaker_open_until: string | null;
  /** ISO time it last opened; null while closed */
  breaker_opened_at: string | null;
  breaker_retry_in_ms: number;
  breaker_window_failure_rate: number;
  /** failed / (ok + failed) over `calls`; 0 without calls */
  error_rate: number;
  calls: { window_s: number; ok: number; failed: number };
  /** measured, successful calls only */
  latency: Percentiles;
  ttft: Percentiles;
  last_error: (Omit<LastError, 'at'> & { at: string }) | null;
  /** the latency policy's ranking score (failures count as penalties); not a measurement */
  latency_score_ms: number | null;
  ttft_score_ms: number | null;
  /** observations behind the score */
  samples: number;
  busy: string | null;
  price: { input: number; output: number } | null;
}

export interface StatusReport {
  version: string;
  /** ISO time this report was taken */
  generated_at: string;
  uptime_s: number;
  ready: boolean;
  draining: boolean;
  in_flight: number;
  models: Array<{ name: string; policy: string; targets: TargetStatus[] }>;
  /** filled in by subsystems that have something to report (cache, limits) */
  extras: Record<string, unknown>;
}

const round = (v: number | undefined | null): number | null => (v === undefined || v === null ? null : Math.round(v * 10) / 10);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
const roundPct = (p: Percentiles): Percentiles => ({ samples: p.samples, p50_ms: round(p.p50_ms), p95_ms: round(p.p95_ms) });

export async function statusReport(deps: GenerationDeps): Promise<StatusReport> {
  const now = Date.now();
  const models: StatusReport['models'] = [];
  for (const [name, m] of Object.entries(deps.config.models)) {
    const targets: TargetStatus[] = m.targets.map((t) => {
      const entry = deps.registry.get(t.backend);
      const h = deps.health.get(t.backend, t.model);
      const est = h.stats.estimate();
      const seen = h.stats.report(now);
      const b = h.breaker.snapshot(now);
      const cap = entry?.llm.capacity?.();
      const calls = seen.ok + seen.failed;
      return {
        backend: t.backend,
        model: t.model,
        backend_status: !entry ? 'missing' : entry.unconfigured ? 'unconfigured' : entry.status,
        breaker: b.state,
        breaker_open_until: iso(b.open_until),
        breaker_opened_at: iso(b.opened_at),
        breaker_retry_in_ms: Math.max(0, Math.round(b.retry_in_ms)),
        breaker_window_failure_rate: Math.round(b.failure_rate * 1000) / 1000,
        error_rate: calls === 0 ? 0 : Math.round((seen.failed / calls) * 1000) / 1000,
        calls: { window_s: Math.round(seen.window_ms / 1000), ok: seen.ok, failed: seen.failed },
        latency: roundPct(seen.latency),
        ttft: roundPct(seen.ttft),
        last_error: seen.last_error ? { ...seen.last_error, at: new Date(seen.last_error.at).toISOString() } : null,
        latency_score_ms: round(est.total),
        ttft_score_ms: round(est.ttft),
        samples: est.samples,
        busy: cap ? `${cap.busy}/${cap.total}` : null,
        price: t.price ?? null,
      };
    });
    models.push({ name, policy: m.policy, targets });
  }
  const extras: Record<string, unknown> = {};
  for (const [k, fn] of Object.entries(deps.statusExtras ?? {})) extras[k] = await fn();
  return {
    version: deps.version,
    generated_at: new Date(now).toISOString(),
    uptime_s: Math.round((now - deps.startedAt) / 1000),
    ready: deps.lifecycle.ready,
    draining: deps.lifecycle.draining,
    in_flight: deps.traffic.inFlight,
    models,
    extras,
  };
}

export function statusJsonHandler(deps: GenerationDeps): ApiHandler {
  return async (x) => {
    const body = JSON.stringify(await statusReport(deps));
    x.out['cache-control'] = 'no-store';
    sendBody(x, 200, 'application/json', body, deps.config.server.send_timeout_ms);
  };
}

const esc = (v: unknown): string =>
  String(v ?? '—').replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch] as string);

const BREAKER_CLASS: Record<string, string> = { closed: 'ok', half_open: 'warn', open: 'bad' };

/** "12:03:04Z" for a time within the report's day, else the full ISO time. */
function clock(isoTime: string, nowIso: string): string {
  return isoTime.slice(0, 10) === nowIso.slice(0, 10) ? `${isoTime.slice(11, 19)}Z` : isoTime;
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

function ago(isoTime: string, nowIso: string): string {
  return seconds(Math.max(0, Date.parse(nowIso) - Date.parse(isoTime)));
}

function breakerCell(t: TargetStatus, nowIso: string): string {
  let detail = '';
  if (t.breaker === 'open' && t.breaker_open_until) detail = `until ${clock(t.breaker_open_until, nowIso)} (in ${seconds(t.breaker_retry_in_ms)})`;
  else if (t.breaker === 'half_open') detail = 'probing with one request';
  return `<td class="${BREAKER_CLASS[t.breaker] ?? ''}">${esc(t.breaker.replace('_', '-'))}${detail ? `<small>${esc(detail)}</small>` : ''}</td>`;
}

function lastErrorCell(t: TargetStatus, nowIso: string): string {
  const e = t.last_error;
  if (!e) return '<td>—</td>';
  const what = [e.status ?? '', e.code ?? ''].filter((s) => s !== '').join(' ');
  return `<td class="err">${what ? `<code>${esc(what)}</code> ` : ''}${esc(e.message)}<small>${esc(`${clock(e.at, nowIso)}, ${ago(e.at, nowIso)} ago`)}</small></td>`;
}

function pctCell(p: Percentiles): string {
  if (p.samples === 0) return '<td class="num">—</td>';
  return `<td class="num">${esc(`${p.p50_ms} / ${p.p95_ms}`)}<small>${esc(`${p.samples} ok`)}</small></td>`;
}

function targetRows(r: StatusReport): string {
  return r.models
    .map((m) =>
      m.targets
        .map((t, i) => {
          const calls = t.calls.ok + t.calls.failed;
          const errClass = t.calls.failed === 0 ? '' : t.error_rate >= 0.5 ? 'bad' : 'warn';
          return `<tr>
  ${i === 0 ? `<th rowspan="${m.targets.length}" scope="rowgroup">${esc(m.name)}<small>${esc(m.policy)}</small></th>` : ''}
  <td>${esc(t.backend)}</td><td><code>${esc(t.model)}</code></td>
  <td class="${t.backend_status === 'ready' ? 'ok' : 'warn'}">${esc(t.backend_status)}</td>
  ${breakerCell(t, r.generated_at)}
  ${lastErrorCell(t, r.generated_at)}
  <td class="num ${errClass}">${calls === 0 ? '—' : esc(`${(t.error_rate * 100).toFixed(1)} %`)}<small>${esc(`${t.calls.ok} ok / ${t.calls.failed} failed`)}</small></td>
  ${pctCell(t.latency)}${pctCell(t.ttft)}
  <td class="num score">${esc(t.latency_score_ms)}</td>
  <td class="num">${esc(t.busy)}</td>
  <td class="num">${t.price ? esc(`$${t.price.input} / $${t.price.output}`) : '—'}</td>
</tr>`;
        })
        .join('\n'),
    )
    .join('\n');
}

const isCache = (v: unknown): v is CacheSection => typeof v === 'object' && v !== null && 'enabled' in v && 'hit' in v && 'miss' in v;
const isKeys = (v: unknown): v is KeysSection => typeof v === 'object' && v !== null && !Array.isArray(v);
const isUsage = (v: KeyStatus): v is KeyUsage => 'requests' in v;

function cacheTable(c: CacheSection): string {
  const rate = c.hit_rate === null ? '—' : `${(c.hit_rate * 100).toFixed(1)} %`;
  return `<h2>cache</h2>
<table class="cache">
<thead><tr><th>enabled</th><th>entries</th><th>hits</th><th>misses</th><th>bypassed</th><th>coalesced</th><th>hit ratio</th></tr></thead>
<tbody><tr><td class="${c.enabled ? 'ok' : ''}">${c.enabled ? 'yes' : 'no'}</td><td class="num">${esc(c.entries)}</td><td class="num">${esc(c.hit)}</td><td class="num">${esc(c.miss)}</td><td class="num">${esc(c.bypass)}</td><td class="num">${esc(c.coalesced)}</td><td class="num">${esc(rate)}</td></tr></tbody>
</table>`;
}

function used(a: { limit: number; remaining: number } | null, unit: string): string {
  return a ? esc(`${Math.max(0, a.limit - a.remaining)} / ${a.limit} ${unit}`) : '—';
}

function keysTable(k: KeysSection): string {
  const state = k.state;
  const rows: string[] = [];
  for (const [name, v] of Object.entries(k)) {
    if (v === undefined || name === 'state') continue;
    if ('store' in v) continue;
    if ('error' in v) {
      rows.push(`<tr><td>${esc(name)}</td><td colspan="4" class="bad">${esc(v.error)}</td></tr>`);
      continue;
    }
    if (!isUsage(v)) {
      rows.push(`<tr><td>${esc(name)}</td><td colspan="4">no limits</td></tr>`);
      continue;
    }
    const conc = v.concurrency ? esc(`${v.concurrency.in_use ?? '?'} / ${v.concurrency.limit}`) : '—';
    const budget = v.budget
      ? esc(`$${(v.budget.spent_usd ?? 0).toFixed(4)} of $${v.budget.limit_usd}${v.budget.period ? ` (${v.budget.period})` : ''}`)
      : '—';
    rows.push(`<tr><td>${esc(name)}</td><td class="num">${used(v.requests, 'per min')}</td><td class="num">${used(v.tokens, 'per min')}</td><td class="num">${conc}</td><td class="num">${budget}</td></tr>`);
  }
  const store = state ? `<p class="meta">state store: ${esc(state.store)}, <span class="${state.state === 'ok' ? 'ok' : 'warn'}">${esc(state.state)}</span>${state.detail ? ` — ${esc(state.detail)}` : ''}</p>` : '';
  return `<h2>keys</h2>
${store}<table class="keys">
<thead><tr><th>key</th><th>requests used / limit</th><th>tokens used / limit</th><th>concurrent in use / limit</th><th>budget used of limit</th></tr></thead>
<tbody>
${rows.length > 0 ? rows.join('\n') : '<tr><td colspan="5">no keys configured (no auth)</td></tr>'}
</tbody></table>`;
}

/** Any other section: its top-level fields as rows. */
function genericTable(name: string, v: unknown): string {
  const entries = typeof v === 'object' && v !== null ? Object.entries(v) : [['value', v] as const];
  const rows = entries.map(([k, x]) => `<tr><th scope="row">${esc(k)}</th><td>${esc(typeof x === 'object' && x !== null ? JSON.stringify(x) : x)}</td></tr>`);
  return `<h2>${esc(name)}</h2>\n<table><tbody>${rows.join('\n')}</tbody></table>`;
}

interface WorkerRow {
  worker: number;
  pid: number | null;
  state: string;
  restarts: number;
  uptime_s?: number;
  in_flight?: number;
  breakers?: Array<{ backend: string; model: string; state: string }>;
}
const isWorkers = (v: unknown): v is WorkerRow[] => Array.isArray(v) && v.every((w) => typeof w === 'object' && w !== null && 'worker' in w && 'state' in w);

/** server.workers > 1: one row per worker. */
function workersTable(list: WorkerRow[]): string {
  const rows = list.map((w) => {
    const notClosed = (w.breakers ?? []).map((b) => `${b.backend}/${b.model}: ${b.state.replace('_', '-')}`).join(', ');
    return `<tr><td class="num">${esc(w.worker)}</td><td class="num">${esc(w.pid)}</td><td class="${w.state === 'serving' ? 'ok' : 'warn'}">${esc(w.state)}</td><td class="num">${esc(w.uptime_s)}</td><td class="num">${esc(w.in_flight)}</td><td class="num">${esc(w.restarts)}</td><td class="${notClosed ? 'warn' : ''}">${notClosed ? esc(notClosed) : 'all closed'}</td></tr>`;
  });
  return `<h2>workers</h2>
<table class="workers">
<thead><tr><th>worker</th><th>pid</th><th>state</th><th>up s</th><th>in flight</th><th>restarts</th><th>breakers (this worker's)</th></tr></thead>
<tbody>${rows.join('\n')}</tbody>
</table>`;
}

function extrasHtml(extras: Record<string, unknown>): string {
  return Object.entries(extras)
    .map(([k, v]) =>
      k === 'cache' && isCache(v) ? cacheTable(v) : k === 'keys' && isKeys(v) ? keysTable(v) : k === 'workers' && isWorkers(v) ? workersTable(v) : genericTable(k, v),
    )
    .join('\n');
}

export function renderStatusHtml(r: StatusReport): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchyard status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #1d1d1f; background: #fafafa; }
  h1 { font-size: 1.4rem; margin: 0 0 .25rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
  .meta { color: #555; margin-bottom: 1.5rem; } .meta span { margin-right: 1.5rem; }
  table { border-collapse: collapse; background: #fff; box-shadow: 0 1px 3px rgba(0,0,0,.08); }
  th, td { padding: .45rem .75rem; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
  thead th { background: #f0f0f3; font-weight: 600; }
  th small, td small { display: block; color: #777; font-weight: 400; }
  td.err { max-width: 22rem; overflow-wrap: anywhere; }
  .num { text-align: right; font-variant-numeric: tabular-nums; }
  .score { color: #777; }
  .ok { color: #137333; } .warn { color: #b06000; } .bad { color: #c5221f; font-weight: 600; }
  .note { color: #777; font-size: .9em; max-width: 60rem; }
</style></head>
<body>
<h1>Switchyard</h1>
<div class="meta"><span>version ${esc(r.version)}</span><span>up ${esc(r.uptime_s)} s</span>
<span class="${r.ready && !r.draining ? 'ok' : 'warn'}">${r.draining ? 'draining' : r.ready ? 'ready' : 'starting'}</span>
<span>${esc(r.in_flight)} in flight</span><span>as of ${esc(r.generated_at)}</span></div>
<table class="targets">
<thead><tr><th>model</th><th>backend</th><th>upstream model</th><th>backend status</th><th>breaker</th><th>last error</th><th>errors (recent calls)</th><th>latency p50 / p95 ms</th><th>TTFT p50 / p95 ms</th><th>latency score (policy)</th><th>busy</th><th>price in/out per 1M</th></tr></thead>
<tbody>
${targetRows(r)}
</tbody></table>
<p class="note">Errors and latency cover the last ${esc(r.models[0]?.targets[0]?.calls.window_s ?? 300)} s of calls; latency and TTFT are measured on successful calls only.
The latency score is what the latency policy ranks by: an average in which every failure counts as a penalty, not a measurement.</p>
${extrasHtml(r.extras)}
</body></html>
`;
}

export function statusHtmlHandler(deps: GenerationDeps): ApiHandler {
  return async (x) => {
    const body = renderStatusHtml(await statusReport(deps));
    x.out['cache-control'] = 'no-store';
    sendBody(x, 200, 'text/html; charset=utf-8', body, deps.config.server.send_timeout_ms);
  };
}
