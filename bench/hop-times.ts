/**
 * Preload for `npm run bench -- --path` (bench/path.ts), loaded into a proxy under test with
 * `node --import`: per request, µs from Node's `http.server.request.start` to undici sending the
 * upstream request (`undici:client:sendHeaders`) and from the upstream's head
 * (`undici:request:headers`) to the first socket write of the client's answer (after its
 * `writeHead`). Meant for one connection at a time: the request in progress is the last one started.
 *
 * SIGWINCH forgets the requests so far; SIGUSR2 appends `{"n","pre","post"}` (medians) as one JSON
 * line to the file named by HOP_TIMES_OUT. Nothing here changes what the proxy does.
 */
import { subscribe } from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import { Socket } from 'node:net';

interface Hops {
  t0: number;
  upSent?: number;
  upHead?: number;
  writeHead?: number;
  clientWrite?: number;
}

const now = (): number => Number(process.hrtime.bigint()) / 1000;
let cur: Hops | undefined;
let all: Hops[] = [];
const mark = (k: 'upSent' | 'upHead' | 'writeHead' | 'clientWrite'): void => {
  if (cur && cur[k] === undefined) cur[k] = now() - cur.t0;
};

subscribe('http.server.request.start', () => {
  cur = { t0: now() };
  all.push(cur);
});
subscribe('undici:client:sendHeaders', () => mark('upSent'));
subscribe('undici:request:headers', () => mark('upHead'));

const writeHead = ServerResponse.prototype.writeHead;
ServerResponse.prototype.writeHead = function (this: ServerResponse, ...args: Parameters<typeof writeHead>) {
  mark('writeHead');
  return writeHead.apply(this, args);
} as typeof writeHead;

/** Node's private socket writers; a client's socket carries its `_httpMessage` while it answers. */
type SocketWriters = { _writeGeneric?: (...a: unknown[]) => unknown; _writev?: (...a: unknown[]) => unknown; _httpMessage?: unknown };
const proto = Socket.prototype as unknown as SocketWriters;
for (const name of ['_writeGeneric', '_writev'] as const) {
  const original = proto[name];
  if (!original) continue;
  proto[name] = function (this: SocketWriters, ...args: unknown[]) {
    if (cur?.writeHead !== undefined && this._httpMessage) mark('clientWrite');
    return original.apply(this, args);
  };
}

function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[s.length >> 1] as number);
}

process.on('SIGWINCH', () => {
  all = [];
});
process.on('SIGUSR2', () => {
  const out = process.env.HOP_TIMES_OUT;
  if (!out) return;
  const pre = median(all.map((r) => r.upSent ?? Number.NaN));
  const post = median(all.map((r) => (r.clientWrite ?? Number.NaN) - (r.upHead ?? Number.NaN)));
  appendFileSync(out, `${JSON.stringify({ n: all.length, pre, post })}\n`);
});
