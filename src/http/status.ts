/**
 * GET /status (JSON) and GET / (the same as a small HTML page for humans, refreshed every 5 s):
 * each public model with its targets' breaker state, recent latency and error rate, backend load
 * status, requests in flight. Served behind the admin guard (see auth.ts); the page also accepts
 * HTTP Basic credentials (any user name, the admin key as password) so a browser can open it.
 */
import type { Context } from 'hono';
import type { Deps } from '../deps.ts';
import type { AppEnv } from './types.ts';

interface TargetStatus {
  backend: string;
  model: string;
  backend_status: string;
  breaker: string;
  error_rate: number;
  latency_ms: number | null;
  ttft_ms: number | null;
  samples: number;
  busy: string | null;
  price: { input: number; output: number } | null;
}

export interface StatusReport {
  version: string;
  uptime_s: number;
  ready: boolean;
  draining: boolean;
  in_flight: number;
  models: Array<{ name: string; policy: string; targets: TargetStatus[] }>;
  /** filled in by subsystems that have something to report (cache, limits) */
  extras: Record<string, unknown>;
}

const round = (v: number | undefined): number | null => (v === undefined ? null : Math.round(v * 10) / 10);

export async function statusReport(deps: Deps): Promise<StatusReport> {
  const now = Date.now();
  const models: StatusReport['models'] = [];
  for (const [name, m] of Object.entries(deps.config.models)) {
    const targets: TargetStatus[] = m.targets.map((t) => {
      const entry = deps.registry.get(t.backend);
      const h = deps.health.get(t.backend, t.model);
      const est = h.stats.estimate();
      const cap = entry?.llm.capacity?.();
      return {
        backend: t.backend,
        model: t.model,
        backend_status: !entry ? 'missing' : entry.unconfigured ? 'unconfigured' : entry.status,
        breaker: h.breaker.stateAt(now),
        error_rate: Math.round(h.breaker.failureRate(now) * 1000) / 1000,
        latency_ms: round(est.total),
        ttft_ms: round(est.ttft),
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
    uptime_s: Math.round((now - deps.startedAt) / 1000),
    ready: deps.lifecycle.ready,
    draining: deps.lifecycle.draining,
    in_flight: deps.traffic.inFlight,
    models,
    extras,
  };
}

export function statusJsonHandler(deps: Deps) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    c.header('content-type', 'application/json');
    c.header('cache-control', 'no-store');
    return c.body(JSON.stringify(await statusReport(deps)), 200);
  };
}

const esc = (v: unknown): string =>
  String(v ?? '—').replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch] as string);

const BREAKER_CLASS: Record<string, string> = { closed: 'ok', half_open: 'warn', open: 'bad' };

export function renderStatusHtml(r: StatusReport): string {
  const rows = r.models
    .map((m) =>
      m.targets
        .map(
          (t, i) => `<tr>
  ${i === 0 ? `<th rowspan="${m.targets.length}" scope="rowgroup">${esc(m.name)}<small>${esc(m.policy)}</small></th>` : ''}
  <td>${esc(t.backend)}</td><td><code>${esc(t.model)}</code></td>
  <td class="${t.backend_status === 'ready' ? 'ok' : 'warn'}">${esc(t.backend_status)}</td>
  <td class="${BREAKER_CLASS[t.breaker] ?? ''}">${esc(t.breaker.replace('_', '-'))}</td>
  <td class="num">${esc(`${(t.error_rate * 100).toFixed(1)} %`)}</td>
  <td class="num">${esc(t.latency_ms)}</td><td class="num">${esc(t.ttft_ms)}</td><td class="num">${esc(t.samples)}</td>
  <td class="num">${esc(t.busy)}</td>
  <td class="num">${t.price ? esc(`$${t.price.input} / $${t.price.output}`) : '—'}</td>
</tr>`,
        )
        .join('\n'),
    )
    .join('\n');
  const extras = Object.entries(r.extras)
    .map(([k, v]) => `<h2>${esc(k)}</h2><pre>${esc(JSON.stringify(v, null, 2))}</pre>`)
    .join('\n');
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
  th small { display: block; color: #777; font-weight: 400; }
  .num { text-align: right; font-variant-numeric: tabular-nums; }
  .ok { color: #137333; } .warn { color: #b06000; } .bad { color: #c5221f; font-weight: 600; }
  pre { background: #fff; padding: .75rem; box-shadow: 0 1px 3px rgba(0,0,0,.08); }
</style></head>
<body>
<h1>Switchyard</h1>
<div class="meta"><span>version ${esc(r.version)}</span><span>up ${esc(r.uptime_s)} s</span>
<span class="${r.ready && !r.draining ? 'ok' : 'warn'}">${r.draining ? 'draining' : r.ready ? 'ready' : 'starting'}</span>
<span>${esc(r.in_flight)} in flight</span></div>
<table>
<thead><tr><th>model</th><th>backend</th><th>upstream model</th><th>backend status</th><th>breaker</th><th>errors (window)</th><th>latency ms</th><th>TTFT ms</th><th>samples</th><th>busy</th><th>price in/out per 1M</th></tr></thead>
<tbody>
${rows}
</tbody></table>
${extras}
</body></html>
`;
}

export function statusHtmlHandler(deps: Deps) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    c.header('content-type', 'text/html; charset=utf-8');
    c.header('cache-control', 'no-store');
    return c.body(renderStatusHtml(await statusReport(deps)), 200);
  };
}
