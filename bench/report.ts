/** Turns one run's measurements into the markdown tables `npm run bench` prints and saves. */
import type { LoadResult, ProbeResult } from './measure.ts';
import type { Scenario } from './scenarios.ts';

export type TargetName = 'direct' | 'floor' | 'switchyard' | 'switchyard+cache';

export interface Row {
  scenario: Scenario;
  target: TargetName;
  load: LoadResult;
  /** kB, largest VmRSS sampled during the run (proxies only) */
  peakRssKb?: number | undefined;
  /** proxies: CPU time (user + system) per response in the cheapest round, µs */
  cpuUsPerReq?: number | undefined;
  /** proxies: share of its core the proxy used while measured, % */
  busyPct?: number | undefined;
  /** for cache rows: the scenario whose direct row it is compared with (and its floor row, when the cache scenario has none of its own) */
  floorOf?: string | undefined;
}

export interface ProbeRow {
  /** 'ttfb-zero' | 'ttfb-paced' (chat), or one of scenarios.ts's PROTOCOL_PROBES */
  id: string;
  label: string;
  target: TargetName;
  result: ProbeResult;
}

export interface LongRow {
  target: TargetName;
  seconds: number;
  peakKb: number;
  /** median VmRSS of the whole run, of its first, second and last tenth, kB */
  medianKb: number;
  firstKb: number;
  secondKb: number;
  lastKb: number;
  rps: number;
  /** VmRSS once a second, MB */
  rssMbPerSecond: number[];
}

export interface Report {
  date: string;
  machine: string[];
  command: string;
  pinning: string;
  seconds: number;
  rounds: number;
  /** rounds of each proxy in the 64-connection scenarios */
  rounds64: number;
  /** seconds of 64-conn chat and of 64-conn stream each proxy got before anything was measured */
  warmStart?: number | undefined;
  /** cores' worth of CPU used by processes outside the benchmark during the run */
  backgroundCores?: number | undefined;
  elapsedSec: number;
  rows: Row[];
  probes: ProbeRow[];
  /** undefined: the cache-hit rows were measured */
  cacheNote?: string | undefined;
  /** native scenarios skipped (and why), or whether the gateway passed their bytes */
  notes?: string[] | undefined;
  long?: LongRow[] | undefined;
}

const num = (v: number | undefined, d = 2): string => (v === undefined || !Number.isFinite(v) ? '—' : v.toFixed(d));
const int = (v: number): string => Math.round(v).toLocaleString('en-US');
/** An added latency: "+0.43", or "−0.53" where the proxy's p50 came out under direct's (a noisy single direct round); a ratio of such is not shown. */
const signed = (v: number): string => (v < 0 ? `−${num(-v)}` : `+${num(v)}`);
/** A proxy's added latency as a multiple of the floor's; shown only when both are positive. */
const addedRatio = (added: number | undefined, floorAdded: number | undefined): string =>
  added !== undefined && floorAdded !== undefined && added > 0 && floorAdded > 0 ? ratio(added / floorAdded) : '—';
const ratio = (v: number | undefined): string => (v === undefined || !Number.isFinite(v) ? '—' : `${v.toFixed(2)}×`);
const mb = (kb: number | undefined): string => (kb === undefined || kb === 0 ? '—' : (kb / 1024).toFixed(1));

function find(rows: Row[], scenario: string, target: TargetName): Row | undefined {
  return rows.find((r) => r.scenario.id === scenario && r.target === target);
}

/** The floor a row is compared with: its scenario's own, else (a cache row) that of `floorOf`. */
function floorFor(rows: Row[], r: Row): Row | undefined {
  return find(rows, r.scenario.id, 'floor') ?? find(rows, r.floorOf ?? '', 'floor');
}

function loadTable(rows: Row[]): string {
  const out = [
    '| scenario | target | RPS | × direct | × floor | p50 ms | p99 ms | added p50 ms | added × floor | CPU µs/req | CPU × floor | proxy core busy | errors | peak RSS MB | RSS × floor |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const r of rows) {
    const base = r.floorOf ?? r.scenario.id;
    const direct = find(rows, base, 'direct');
    const floor = floorFor(rows, r);
    const isDirect = r.target === 'direct';
    const added = direct && !isDirect ? r.load.p50 - direct.load.p50 : undefined;
    const floorAdded = direct && floor ? floor.load.p50 - direct.load.p50 : undefined;
    out.push(
      `| ${r.scenario.label} | ${r.target} | ${int(r.load.rps)} | ${ratio(direct ? r.load.rps / direct.load.rps : undefined)} | ${isDirect || !floor ? '—' : ratio(r.load.rps / floor.load.rps)} | ${num(r.load.p50)} | ${num(r.load.p99)} | ${added === undefined ? '—' : signed(added)} | ${r.target !== 'floor' ? addedRatio(added, floorAdded) : '—'} | ${num(r.cpuUsPerReq, 0)} | ${r.target !== 'floor' && r.cpuUsPerReq && floor?.cpuUsPerReq ? ratio(r.cpuUsPerReq / floor.cpuUsPerReq) : '—'} | ${r.busyPct === undefined ? '—' : `${r.busyPct.toFixed(0)}%`} | ${r.load.errors} | ${mb(r.peakRssKb)} | ${r.target !== 'floor' && r.peakRssKb && floor?.peakRssKb ? ratio(r.peakRssKb / floor.peakRssKb) : '—'} |`,
    );
  }
  return out.join('\n');
}

function probeTable(probes: ProbeRow[]): string {
  const out = [
    '| probe (1 conn, sequential) | target | TTFB p50 ms | TTFT p50 ms | TTFT p99 ms | added TTFT ms | added × floor | stream end p50 ms | body reads p50 | n | errors |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const p of probes) {
    const direct = probes.find((x) => x.id === p.id && x.target === 'direct');
    const floor = probes.find((x) => x.id === p.id && x.target === 'floor');
    const added = direct && p.target !== 'direct' ? p.result.ttft50 - direct.result.ttft50 : undefined;
    const floorAdded = direct && floor ? floor.result.ttft50 - direct.result.ttft50 : undefined;
    out.push(
      `| ${p.label} | ${p.target} | ${num(p.result.ttfb50)} | ${num(p.result.ttft50)} | ${num(p.result.ttft99)} | ${added === undefined ? '—' : signed(added)} | ${p.target === 'switchyard' ? addedRatio(added, floorAdded) : '—'} | ${num(p.result.total50)} | ${p.result.reads50} | ${p.result.count} | ${p.result.errors} |`,
    );
  }
  return out.join('\n');
}

/** `cpu`: the same comparison by CPU time per request (capacity of one saturated core), steadier on a busy machine */
type Check = { what: string; measured: string; goal: string; ok: boolean | undefined; cpu?: { text: string; ok: boolean } | undefined };

const capacity = (floorCpu: number | undefined, cpu: number | undefined): number | undefined => (floorCpu && cpu ? floorCpu / cpu : undefined);

function checks(r: Report): Check[] {
  const out: Check[] = [];
  const addedRatio = (id: string): number | undefined => {
    const d = find(r.rows, id, 'direct');
    const f = find(r.rows, id, 'floor');
    const s = find(r.rows, id, 'switchyard');
    if (!d || !f || !s) return undefined;
    return (s.load.p50 - d.load.p50) / (f.load.p50 - d.load.p50);
  };
  // one connection: JSON scenarios by added p50, streams by the first-token probes
  for (const s of r.rows.filter((x) => x.target === 'switchyard' && x.scenario.connections === 1 && !x.scenario.stream)) {
    const a = addedRatio(s.scenario.id);
    if (a !== undefined) out.push({ what: `added p50, ${s.scenario.label}`, measured: ratio(a), goal: '≤ 1.50× floor', ok: a <= 1.5 });
  }
  for (const id of [...new Set(r.probes.map((p) => p.id))].filter((x) => x !== 'ttfb-paced')) {
    const pz = ['direct', 'floor', 'switchyard'].map((t) => r.probes.find((p) => p.id === id && p.target === t));
    if (!pz[0] || !pz[1] || !pz[2]) continue;
    const v = (pz[2].result.ttft50 - pz[0].result.ttft50) / (pz[1].result.ttft50 - pz[0].result.ttft50);
    out.push({ what: `added time to first token, ${id === 'ttfb-zero' ? 'stream' : pz[2].label.replace(/, zero-latency$/, '')}, 1 conn`, measured: ratio(v), goal: '≤ 1.50× floor', ok: v <= 1.5 });
  }
  for (const s of r.rows.filter((x) => x.target === 'switchyard' && x.scenario.connections === 64)) {
    const f = find(r.rows, s.scenario.id, 'floor');
    if (!f) continue;
    const v = s.load.rps / f.load.rps;
    const cap = capacity(f.cpuUsPerReq, s.cpuUsPerReq);
    out.push({ what: `throughput, ${s.scenario.label}`, measured: ratio(v), goal: '≥ 0.75× floor', ok: v >= 0.75, cpu: cap === undefined ? undefined : { text: ratio(cap), ok: cap >= 0.75 } });
  }
  for (const c of r.rows.filter((x) => x.target === 'switchyard+cache')) {
    const f = floorFor(r.rows, c);
    if (!f) continue;
    const faster = c.scenario.connections === 1 ? c.load.p50 < f.load.p50 : c.load.rps > f.load.rps;
    const m = c.scenario.connections === 1 ? `p50 ${num(c.load.p50)} vs ${num(f.load.p50)} ms` : `${int(c.load.rps)} vs ${int(f.load.rps)} RPS`;
    const cap = c.scenario.connections === 1 ? undefined : capacity(f.cpuUsPerReq, c.cpuUsPerReq);
    out.push({ what: `${c.scenario.label} vs floor pass-through`, measured: m, goal: 'faster than floor', ok: faster, cpu: cap === undefined ? undefined : { text: `${ratio(cap)} (${num(c.cpuUsPerReq, 0)} vs ${num(f.cpuUsPerReq, 0)} µs/req)`, ok: cap > 1 } });
  }
  if (r.cacheNote) out.push({ what: 'cache hit vs floor pass-through', measured: r.cacheNote, goal: 'faster than floor', ok: undefined });
  // the scenarios both proxies serve (not the floor's rounds beside the cache hits, which would
  // give it more chances at a high mark than the gateway has)
  const peak = (t: TargetName): number => Math.max(0, ...r.rows.filter((x) => x.target === t && x.scenario.connections === 64 && !x.floorOf && x.peakRssKb).map((x) => x.peakRssKb ?? 0));
  if (peak('floor') > 0 && peak('switchyard') > 0) {
    const v = peak('switchyard') / peak('floor');
    out.push({ what: 'peak RSS under 64-conn load', measured: `${ratio(v)} (${mb(peak('switchyard'))} vs ${mb(peak('floor'))} MB)`, goal: '≤ 1.50× floor', ok: v <= 1.5 });
  }
  const sl = r.long?.filter((l) => l.target === 'switchyard') ?? [];
  const short = sl[0];
  const long = sl[1];
  if (short && long) {
    // medians, not peaks: RSS saw-tooths by tens of MB between old-generation GCs; the first
    // tenth (and the whole short run) is still warming up, so the climb is measured from the second
    const v = long.lastKb / long.secondKb;
    out.push({
      what: `RSS flat over a 10× longer run (${short.seconds} s → ${long.seconds} s)`,
      measured: `${ratio(v)}: median ${mb(long.secondKb)} MB in the 2nd tenth of ${long.seconds} s, ${mb(long.lastKb)} MB in the last (${short.seconds} s run: median ${mb(short.medianKb)}; peaks ${mb(short.peakKb)} / ${mb(long.peakKb)} MB)`,
      goal: 'no climb: last tenth ≤ 1.10× 2nd tenth',
      ok: v <= 1.1,
    });
  } else {
    out.push({ what: 'RSS flat over a 10× longer run', measured: 'not run (`npm run bench -- --long`)', goal: '≤ 1.10×', ok: undefined });
  }
  const pp = ['direct', 'switchyard'].map((t) => r.probes.find((p) => p.id === 'ttfb-paced' && p.target === t));
  if (pp[0] && pp[1]) {
    const v = pp[1].result.ttft50 - pp[0].result.ttft50;
    out.push({ what: 'paced stream: first token vs direct (never buffered)', measured: `+${num(v)} ms`, goal: '≤ +2 ms', ok: v <= 2 });
  }
  return out;
}

function checkTable(r: Report): string {
  const mark = (ok: boolean | undefined): string => (ok === undefined ? 'n/a' : ok ? 'met' : '**not met**');
  return [
    '| target (issues 8, 24, 25) | goal | measured | status | by CPU µs/req: capacity vs floor | status |',
    '|---|---|---|---|---|---|',
    ...checks(r).map((c) => `| ${c.what} | ${c.goal} | ${c.measured} | ${mark(c.ok)} | ${c.cpu?.text ?? '—'} | ${c.cpu ? mark(c.cpu.ok) : '—'} |`),
  ].join('\n');
}

function longTable(rows: LongRow[]): string {
  return [
    '| target | seconds | RPS | peak RSS MB | median RSS MB | median, 1st tenth | median, 2nd tenth | median, last tenth |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
    ...rows.map((l) => `| ${l.target} | ${l.seconds} | ${int(l.rps)} | ${mb(l.peakKb)} | ${mb(l.medianKb)} | ${mb(l.firstKb)} | ${mb(l.secondKb)} | ${mb(l.lastKb)} |`),
  ].join('\n');
}

/** The markdown block: what ran where, the load table, the probes, the targets. */
export function render(r: Report): string {
  const parts = [
    `Run ${r.date} · ${r.elapsedSec.toFixed(0)} s · \`${r.command}\``,
    '',
    `Machine: ${r.machine.join(' · ')}`,
    '',
    `Processes: ${r.pinning}.${r.backgroundCores !== undefined ? ` Other processes on the machine used ${r.backgroundCores.toFixed(2)} cores on average during the run${r.backgroundCores > 0.2 ? ' (a noisy run: absolute numbers are low and throughput ratios noisy; CPU µs/req is the steadier measure)' : ''}.` : ''}`,
    '',
    `${r.warmStart ? `Every proxy first got ${r.warmStart} s of 64-conn chat and ${r.warmStart} s of 64-conn stream (JIT warm-up, nothing measured). ` : ''}Each (scenario, target): ${r.rounds} round${r.rounds > 1 ? 's' : ''} of ${r.seconds} s, interleaved with the other targets, after a short warm-up — except at 64 connections, where each proxy gets ${r.rounds64} and direct (no proxy: a reference no target judges there) 1; the cache-hit pairs get ${r.rounds}. The row shows the round with the most RPS. Latencies are autocannon's per-response times (sub-ms). "added" = p50 minus the direct (no proxy) p50 of the same scenario; "× floor" compares with the bare node:http + undici.request proxy measured in the same run. CPU µs/req = the proxy process's user + system time per response in its cheapest round (1,000,000 / that ≈ what one core could serve); "proxy core busy" = its share of its core in that round (below ~95%: the proxy was not the only limit — the load generator's core, the 1-connection round trip, or another process on its core). Peak RSS = largest VmRSS sampled every 100 ms. The cache-hit scenarios have their own floor rows: the floor passing the same body through, in rounds interleaved with the hits, which the hits are compared with.`,
    '',
    loadTable(r.rows),
    ...(r.notes?.length ? ['', 'Native scenarios (the upstream speaks the route\'s own API):', '', ...r.notes.map((n) => `- ${n}`)] : []),
    '',
    'Streams, one request at a time: TTFB = first body byte, TTFT = first content token (the gateway holds the response until the first content chunk, its commit point, so for it the two coincide). "zero-latency" sends the whole stream at once; "paced" sends a chunk every 5 ms (role, 20 contents, finish, [DONE]; the gateway always asks upstream for usage, one event more, so its stream ends ~5 ms later). Each probe runs three interleaved rounds per target (1 s zero-latency, 1.5 s paced); each figure is the median of the rounds of a target, n their sum. Body reads = separate arrivals at the client: a proxy that buffered the stream would show a handful, not ~one per event.',
    '',
    probeTable(r.probes),
  ];
  if (r.cacheNote) parts.push('', `Cache hit: ${r.cacheNote}.`);
  if (r.long?.length) parts.push('', 'RSS flatness (64-conn chat, N and 10N seconds):', '', longTable(r.long));
  parts.push('', checkTable(r));
  return parts.join('\n');
}
