/**
 * `npm run bench -- --tracing [--ab-starts 4] [--ab-rounds 4] [--only chat-c64,stream-c64]`: what
 * OpenTelemetry tracing costs Switchyard in CPU per response. Four gateways on the default config
 * (scenarios.ts's gatewayYaml), differing only in their OTEL_* variables: tracing off, on with the
 * `always_on` sampler (every request a SERVER and a CLIENT span, exported), on with
 * `traceidratio` 0.01, and on with `always_off` (the hooks of unsampled requests alone). They export OTLP/HTTP protobuf (the default) to a sink in this process that
 * answers 200 and counts the spans it gets. Measured as bench/ab.ts measures: every gateway started
 * afresh `--ab-starts` times, rounds of 2 s alternating between them, the cheapest round kept (the
 * median beside it). Spans per response, counted over the whole run once the last batch arrived,
 * show whether every span left (2 at 1.0, about 0.02 at 0.01).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Commands } from './build.ts';
import { load, median } from './measure.ts';
import { cpuMs, stopProc, type Pinning, type Proc } from './procs.ts';
import { SCENARIOS, startSwitchyard, type Scenario } from './scenarios.ts';

interface TracingOptions {
  results: string;
  mock: Proc;
  pin: Pinning;
  commands: Commands;
  ids: string[];
  starts: number;
  rounds: number;
  say: (s: string) => void;
}

/** A protobuf varint at `at`: its value and where the next field starts. */
function varint(b: Buffer, at: number): [number, number] {
  let v = 0;
  let mul = 1;
  for (;;) {
    const byte = b[at++] as number;
    v += (byte & 0x7f) * mul;
    if (byte < 0x80) return [v, at];
    mul *= 128;
  }
}

/** Calls `each(field, start, end)` for every length-delimited field of the message in b[from, to). */
function fields(b: Buffer, from: number, to: number, each: (field: number, start: number, end: number) => void): void {
  let at = from;
  while (at < to) {
    const [key, next] = varint(b, at);
    at = next;
    const wire = key & 7;
    if (wire === 0) at = varint(b, at)[1];
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const [len, start] = varint(b, at);
      each(key >>> 3, start, start + len);
      at = start + len;
    } else throw new Error(`OTLP sink: wire type ${wire}`);
  }
}

/** Spans in an OTLP ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) → spans (2). */
export function countSpans(b: Buffer): number {
  let n = 0;
  fields(b, 0, b.length, (f, s, e) => {
    if (f !== 1) return;
    fields(b, s, e, (f2, s2, e2) => {
      if (f2 !== 2) return;
      fields(b, s2, e2, (f3) => {
        if (f3 === 2) n++;
      });
    });
  });
  return n;
}

/** An OTLP/HTTP protobuf trace sink: POST /v1/traces answered 200, its spans counted per gateway (by the URL's first segment). */
async function startSink(): Promise<{ url: string; spans: Map<string, number>; server: Server }> {
  const spans = new Map<string, number>();
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const m = /^\/([^/]+)\/v1\/traces$/.exec(req.url ?? '');
      if (req.method !== 'POST' || m === null) {
        res.writeHead(404).end();
        return;
      }
      const who = m[1] as string;
      spans.set(who, (spans.get(who) ?? 0) + countSpans(Buffer.concat(parts)));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, server };
}

/** CPU µs per response of `p` over one round of `sc` (as bench/ab.ts measures), and the responses. */
async function cpuRound(p: Proc, sc: Scenario, seconds: number): Promise<{ us: number; count: number }> {
  const before = cpuMs(p.pid);
  const r = await load(p.url, { path: sc.path, body: sc.body, connections: sc.connections, seconds }, 0);
  return { us: ((cpuMs(p.pid) - before) * 1000) / Math.max(1, r.responses), count: r.responses };
}

interface Variant {
  id: string;
  label: string;
  env: Record<string, string>;
}

const VARIANTS: Variant[] = [
  { id: 'off', label: 'off', env: {} },
  { id: 'on', label: 'always_on (1.0)', env: { OTEL_TRACES_SAMPLER: 'always_on' } },
  { id: 'ratio', label: 'traceidratio 0.01', env: { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' } },
  // on, nothing sampled: the hooks of a request that is not sampled, without any export
  { id: 'aoff', label: 'always_off', env: { OTEL_TRACES_SAMPLER: 'always_off' } },
];

/** The proxies' environment without any OTEL_* variable of this shell (tracing off unless the variant sets it). */
function envFor(base: NodeJS.ProcessEnv, v: Variant, sink: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, val] of Object.entries(base)) if (!k.startsWith('OTEL_')) env[k] = val;
  if (v.id === 'off') return env;
  return { ...env, ...v.env, OTEL_EXPORTER_OTLP_ENDPOINT: `${sink}/${v.id}` };
}

export async function tracingScenario(o: TracingOptions): Promise<string> {
  const scenarios = o.ids.map((id) => SCENARIOS.find((s) => s.id === id)).filter((s): s is Scenario => s !== undefined);
  const native = scenarios.filter((s) => s.native).map((s) => s.id);
  if (native.length) throw new Error(`--tracing measures translated routes only; drop ${native.join(', ')}`);
  if (scenarios.length === 0) throw new Error(`--tracing: no scenario among ${o.ids.join(', ')}`);
  const sink = await startSink();
  // CPU µs per response of every round: [scenario][variant]
  const all = new Map<string, number[][]>(scenarios.map((s) => [s.id, VARIANTS.map(() => [])]));
  const responses = new Map<string, number>(VARIANTS.map((v) => [v.id, 0]));
  try {
    for (let start = 0; start < o.starts; start++) {
      // a different order per start: no variant always starts first or measures first
      const order = VARIANTS.map((_, i) => (i + start) % VARIANTS.length);
      const procs: Proc[] = [];
      try {
        for (const i of order) {
          const v = VARIANTS[i] as Variant;
          procs[i] = await startSwitchyard({
            name: `switchyard (tracing ${v.id})`,
            args: o.commands.gateway,
            yamlPath: join(o.results, `tracing-${v.id}.yaml`),
            mockPort: o.mock.port,
            core: o.pin.enabled ? o.pin.proxyCore : undefined,
            env: envFor(o.commands.proxyEnv, v, sink.url),
          });
        }
        // JIT warm-up of every scenario measured, nothing recorded (its spans are counted: so are its responses)
        for (const i of order) {
          for (const sc of scenarios) {
            const r = await load((procs[i] as Proc).url, { path: sc.path, body: sc.body, connections: sc.connections, seconds: 3 }, 0);
            const id = (VARIANTS[i] as Variant).id;
            responses.set(id, (responses.get(id) ?? 0) + r.responses);
          }
        }
        for (const sc of scenarios) {
          const mine: number[][] = VARIANTS.map(() => []);
          for (let r = 0; r < o.rounds; r++) {
            for (const i of r % 2 ? [...order].reverse() : order) {
              const v = VARIANTS[i] as Variant;
              // the gateway measured before may still be exporting its last spans on the same core
              await sleep(500);
              const { us, count } = await cpuRound(procs[i] as Proc, sc, 2);
              mine[i]?.push(us);
              responses.set(v.id, (responses.get(v.id) ?? 0) + count);
            }
          }
          all.get(sc.id)?.forEach((xs, i) => xs.push(...(mine[i] ?? [])));
          o.say(`start ${start + 1}, ${sc.id}: ${VARIANTS.map((v, i) => `${v.id} ${Math.min(...(mine[i] ?? [])).toFixed(1)}`).join(', ')} µs/req (cheapest round)`);
        }
      } finally {
        // a stopped gateway flushes its last spans on the way out
        for (const p of procs) if (p) await stopProc(p);
      }
    }
    await sleep(500);
  } finally {
    await new Promise<void>((r) => sink.server.close(() => r()));
  }
  const perResponse = (id: string): string => {
    const n = responses.get(id) ?? 0;
    return n > 0 ? ((sink.spans.get(id) ?? 0) / n).toFixed(3) : 'n/a';
  };
  const rows: string[] = [];
  for (const sc of scenarios) {
    const rounds = all.get(sc.id) ?? [];
    const off = Math.min(...(rounds[0] ?? []));
    for (const [i, v] of VARIANTS.entries()) {
      const xs = rounds[i] ?? [];
      const best = Math.min(...xs);
      const ratio = i === 0 ? '1.00' : `${(best / off).toFixed(3)} (${best >= off ? '+' : ''}${(((best - off) / off) * 100).toFixed(1)}%)`;
      rows.push(`| ${sc.id} | ${v.label} | ${best.toFixed(1)} | ${median(xs).toFixed(1)} | ${ratio} |`);
    }
  }
  return [
    `Switchyard's CPU µs per response with tracing off and on (OTLP/HTTP protobuf to a local sink that answers 200): ${o.starts} fresh starts of each × ${o.rounds} alternating rounds of 2 s per scenario; the cheapest round, the median beside it.`,
    '',
    '| scenario | tracing | µs/req (cheapest) | µs/req (median) | vs off |',
    '|---|---|--:|--:|--:|',
    ...rows,
    '',
    `Spans received per response (all rounds and warm-ups): ${VARIANTS.slice(1).map((v) => `${v.label} ${perResponse(v.id)}`).join(', ')}; off ${sink.spans.get('off') ?? 0} spans.`,
  ].join('\n');
}
