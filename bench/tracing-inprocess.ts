/**
 * Tracing's own cost in process: one chat request's hooks (the SERVER span, one CLIENT attempt,
 * the call, the answer, the request's end) driven through telemetry/tracing.ts with the real SDK,
 * batch processor and OTLP/HTTP protobuf exporter, sending to a sink in a child process (its
 * CPU is not counted). CPU µs per request per sampler; no gateway, no network but the export.
 *
 *   node --import tsx bench/tracing-inprocess.ts [--n 50000] [--sampler always_on|traceidratio|all]
 */
import { fork } from 'node:child_process';
import { withTrace } from '../src/telemetry/logger.ts';
import { startTracing, stopTracing, type Tracing } from '../src/telemetry/tracing.ts';

const argOf = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] as string) : dflt;
};
const N = Number(argOf('--n', '50000'));
const which = argOf('--sampler', 'all');

if (process.argv[2] === 'sink') {
  const { createServer } = await import('node:http');
  let spans = 0;
  const server = createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      spans++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as { port: number }).port }));
  process.on('message', () => process.send?.({ batches: spans }));
} else {
  const sink = fork(new URL(import.meta.url).pathname, ['sink'], { execArgv: ['--import', 'tsx'] });
  const port = await new Promise<number>((r) => sink.once('message', (m: { port: number }) => r(m.port)));
  const quiet = { warn: (): void => {}, info: (): void => {} };
  const body = { model: 'm', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 32, temperature: 0 };
  const answer = {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'm-upstream',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
  };
  const headers = { host: '127.0.0.1', 'content-type': 'application/json' };
  const one = (t: Tracing, i: number): void => {
    const id = `req-${i}`;
    const rt = t.startRequest(id, 'POST', '/v1/chat/completions', '/v1/chat/completions', headers);
    const at = rt.attempt({ op: 'chat', model: 'm-upstream', publicModel: 'm', backend: 'mock', backendType: 'openai', attempt: 1, retry: 0, failover: false, policy: 'fallback', breaker: 'closed' });
    withTrace({ request_id: id }, rt);
    at.call('http://127.0.0.1:9999', body);
    at.answer(answer);
    rt.finish(200, { route: '/v1/chat/completions', model: 'm', backend: 'mock', upstreamModel: 'm-upstream', attempts: 1, cache: 'miss', stream: false, key: 'k', promptTokens: 12, completionTokens: 3, costUsd: 0.00001 });
  };
  const run = async (label: string, env: Record<string, string>): Promise<void> => {
    const t = startTracing(undefined, quiet, '0', { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_EXPORTER_OTLP_PROTOCOL: argOf('--protocol', 'http/protobuf'), ...env });
    if (t === undefined) throw new Error('tracing did not start');
    for (let i = 0; i < 5000; i++) one(t, i);
    await t.flush();
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) {
      one(t, i);
      // let the batch processor's timer and the exporter's sockets run, as a server's loop would
      if (i % 256 === 255) await new Promise((r) => setImmediate(r));
    }
    await t.flush();
    const c = process.cpuUsage(c0);
    await stopTracing(t);
    console.log(`${label.padEnd(18)} ${(((c.user + c.system) / N)).toFixed(2)} µs/request (CPU, hooks + export)`);
  };
  if (which === 'all' || which === 'always_on') await run('always_on', { OTEL_TRACES_SAMPLER: 'always_on' });
  if (which === 'all' || which === 'traceidratio') await run('traceidratio 0.01', { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' });
  if (which === 'all' || which === 'off') await run('always_off', { OTEL_TRACES_SAMPLER: 'always_off' });
  sink.kill();
}
