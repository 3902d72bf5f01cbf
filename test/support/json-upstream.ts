/**
 * A minimal upstream for tests that need exact answer bytes: it reads each request's JSON body,
 * counts the calls, and answers 200 `application/json` with the text `answer` returns for it,
 * after `delayMs` when given.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface JsonUpstream {
  /** http://127.0.0.1:PORT/v1 — what a backend takes as base_url */
  baseURL: string;
  /** requests answered so far */
  readonly calls: number;
  close(): Promise<void>;
}

export async function startJsonUpstream(answer: (body: Record<string, unknown>) => { text: string; delayMs?: number }): Promise<JsonUpstream> {
  let calls = 0;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      calls++;
      const { text, delayMs } = answer(JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>);
      const send = (): void => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
        res.end(text);
      };
      if (delayMs !== undefined) setTimeout(send, delayMs);
      else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    get calls() {
      return calls;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
