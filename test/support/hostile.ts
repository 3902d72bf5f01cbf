/**
 * Helpers for the hostile-client tests: raw sockets that send what a well-behaved HTTP client would
 * not (partial headers, half a body, a byte at a time) and report what came back and when the
 * socket closed; one-shot HTTP requests without keep-alive (so the gateway's connection count can
 * be checked afterwards); /metrics scraping; forced GC and the process's active handles by type.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { connect, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestGateway } from './gateway.ts';

export interface RawResult {
  /** everything the server sent, latin1 */
  data: string;
  /** ms from connect to close */
  closedAfterMs: number;
  /** a socket error seen (ECONNRESET, EPIPE, …), if any */
  error?: string;
}

/** A raw client socket; `done` resolves when the socket closes (or after `maxMs`, when it is destroyed). */
export interface RawSocket {
  socket: Socket;
  /** bytes received so far */
  received(): string;
  done: Promise<RawResult>;
}

export function rawSocket(baseUrl: string, first: string | Buffer, maxMs = 120_000): RawSocket {
  const { hostname, port } = new URL(baseUrl);
  const started = performance.now();
  const socket = connect(Number(port), hostname, () => {
    if (first.length > 0) socket.write(first);
  });
  socket.setNoDelay(true);
  const parts: Buffer[] = [];
  let error: string | undefined;
  socket.on('data', (d: Buffer) => parts.push(d));
  socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
  const done = new Promise<RawResult>((resolve) => {
    const cap = setTimeout(() => socket.destroy(), maxMs);
    socket.on('close', () => {
      clearTimeout(cap);
      const r: RawResult = { data: Buffer.concat(parts).toString('latin1'), closedAfterMs: performance.now() - started };
      if (error !== undefined) r.error = error;
      resolve(r);
    });
  });
  return { socket, received: () => Buffer.concat(parts).toString('latin1'), done };
}

/**
 * Sends the head of a POST with `expect: 100-continue`, waits for the server's `100 Continue` (so
 * the request has certainly been parsed and dispatched), then `firstBodyBytes` of the body. For
 * clients that vanish mid-body: without the wait, a socket destroyed before the server even read
 * the head is not a request at all.
 */
export async function startBody(baseUrl: string, path: string, body: string, firstBodyBytes: number): Promise<RawSocket> {
  const s = rawSocket(baseUrl, postHead(path, Buffer.byteLength(body), 'expect: 100-continue\r\n'));
  await new Promise<void>((resolve, reject) => {
    const check = (): void => {
      if (s.received().startsWith('HTTP/1.1 100 ')) {
        s.socket.off('data', check);
        resolve();
      }
    };
    s.socket.on('data', check);
    void s.done.then((r) => reject(new Error(`closed before 100 Continue: ${r.data.slice(0, 200)}`)));
  });
  s.socket.write(Buffer.from(body).subarray(0, firstBodyBytes));
  return s;
}

/** The head of a POST with an explicit content-length (the body is up to the caller). */
export function postHead(path: string, contentLength: number, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${contentLength}\r\n${extra}\r\n`;
}

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/**
 * One request on its own connection (`connection: close`, no agent), so nothing stays pooled on
 * either side. Rejects on a transport error.
 */
export function oneShot(
  baseUrl: string,
  method: string,
  path: string,
  body?: string | Buffer,
  headers: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<Reply> {
  const u = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: Number(u.port), path: u.pathname + u.search, method, agent: false, headers: { connection: 'close', ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** Sum of a metric's samples whose labels include `match` (Prometheus text format). */
export function metricSum(text: string, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const labels = new Map<string, string>();
    const inner = /^\{(.*)\}/.exec(rest)?.[1] ?? '';
    for (const m of inner.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels.set(m[1] as string, m[2] as string);
    if (Object.entries(match).every(([k, v]) => labels.get(k) === v)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

export async function scrapeMetrics(baseUrl: string, adminKey: string): Promise<string> {
  const r = await oneShot(baseUrl, 'GET', '/metrics', undefined, { authorization: `Bearer ${adminKey}` });
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.text.slice(0, 200)}`);
  return r.text;
}

/** Polls `probe` until `ok(value)`; returns the last value (and throws with it after `timeoutMs`). */
export async function eventually<T>(probe: () => T | Promise<T>, ok: (v: T) => boolean, what: string, timeoutMs = 10_000, everyMs = 50): Promise<T> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (performance.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(v)}`);
    await sleep(everyMs);
  }
}

/** Connections the gateway's HTTP server holds open right now. */
export function serverConnections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

let gcFn: (() => void) | undefined;
/** A forced full GC (the flag is set at run time, so the test needs no --expose-gc). */
export function forceGc(): void {
  if (!gcFn) {
    setFlagsFromString('--expose-gc');
    gcFn = runInNewContext('gc') as () => void;
  }
  gcFn();
}

/** heapUsed after a few full GCs, with turns of the event loop between them (finalizers, weak refs). */
export async function settledHeap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    forceGc();
    await sleep(20);
  }
  forceGc();
  return process.memoryUsage().heapUsed;
}

/** process.getActiveResourcesInfo() as counts by type ("TCPSocketWrap", "Timeout", …). */
export function activeResources(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of process.getActiveResourcesInfo()) out[t] = (out[t] ?? 0) + 1;
  return out;
}

export const MB = 1024 * 1024;

const CHAT = '/v1/chat/completions';

export const chatBody = (model: string, content = 'hello there', extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model, messages: [{ role: 'user', content }], ...extra });

/** The OpenAI envelope of a raw HTTP answer (status line, headers, JSON body). */
export function rawEnvelope(data: string): { status: number; code: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(data)?.[1] ?? 0);
  const body: unknown = JSON.parse(data.slice(data.indexOf('\r\n\r\n') + 4));
  assert.ok(typeof body === 'object' && body !== null && 'error' in body, `an envelope: ${data.slice(0, 300)}`);
  const e = (body as { error: { code?: unknown; type?: unknown } }).error;
  assert.equal(e.type, 'invalid_request_error');
  return { status, code: e.code };
}

export async function inFlightOf(gw: TestGateway, adminKey: string): Promise<number> {
  return metricSum(await scrapeMetrics(gw.url, adminKey), 'switchyard_in_flight_requests');
}

/** /status's in_flight (counted apart from the metric; the SSE writer reads it to decide how to write). */
export async function statusInFlightOf(gw: TestGateway, adminKey: string): Promise<number> {
  const r = await oneShot(gw.url, 'GET', '/status', undefined, { authorization: `Bearer ${adminKey}` });
  return (JSON.parse(r.text) as { in_flight: number }).in_flight;
}

export async function requestsTotalOf(gw: TestGateway, adminKey: string, route = CHAT): Promise<number> {
  return metricSum(await scrapeMetrics(gw.url, adminKey), 'switchyard_requests_total', { route });
}

/** After hostile traffic: no connection left on the server, nothing in flight, still serving `model`. */
export async function cleanAndServing(gw: TestGateway, model: string, adminKey: string): Promise<void> {
  await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'the gateway to hold no client connection', 15_000);
  await eventually(() => inFlightOf(gw, adminKey), (n) => n === 0, 'switchyard_in_flight_requests to return to 0', 15_000);
  const ok = await oneShot(gw.url, 'POST', CHAT, chatBody(model));
  assert.equal(ok.status, 200, ok.text);
  await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'the check request to close', 15_000);
}

/** Runs `n` tasks at most `concurrency` at a time. */
export async function pool(n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      for (let i = next++; i < n; i = next++) await task(i);
    }),
  );
}
