/**
 * An OpenAI-compatible upstream whose chat streams never end: `data:` chunks of `chunkBytes`
 * characters of content, written only as fast as its socket drains (a well-behaved server under
 * backpressure), until the gateway closes the connection. It counts what it wrote and how many
 * streams are open, so a test can tell whether the gateway stopped reading (backpressure reached
 * the upstream) or kept buffering.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface EndlessUpstream {
  /** http://127.0.0.1:PORT/v1 */
  url: string;
  /** bytes written to all streams so far */
  written(): number;
  /** streams started, and streams whose connection has closed */
  started(): number;
  open(): number;
  close(): Promise<void>;
}

export async function startEndlessUpstream(chunkBytes = 4096): Promise<EndlessUpstream> {
  let written = 0;
  let started = 0;
  let open = 0;
  const sockets = new Set<Socket>();
  const event = `data: ${JSON.stringify({ id: 'c-endless', object: 'chat.completion.chunk', created: 1, model: 'endless', choices: [{ index: 0, delta: { content: 'x'.repeat(chunkBytes) }, finish_reason: null }] })}\n\n`;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      started++;
      open++;
      let closed = false;
      res.on('close', () => {
        closed = true;
        open--;
      });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(`data: ${JSON.stringify({ id: 'c-endless', object: 'chat.completion.chunk', created: 1, model: 'endless', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`);
      const pump = (): void => {
        while (!closed) {
          written += event.length;
          if (!res.write(event)) {
            res.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    written: () => written,
    started: () => started,
    open: () => open,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
