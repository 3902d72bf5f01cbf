/**
 * The part of autocannon@9's programmatic API the benchmarks use (the package ships no types).
 * Only the callback form is declared: `autocannon(opts, cb)` returns the run's event emitter.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      method?: 'GET' | 'POST';
      headers?: Record<string, string>;
      body?: string | Buffer;
      connections?: number;
      pipelining?: number;
      /** seconds */
      duration?: number;
      /** per-request timeout, seconds */
      timeout?: number;
      /** stop after this many errors */
      bailout?: number;
      /** every `[<id>]` in `body` becomes a fresh random id in each request */
      idReplacement?: boolean;
    }

    /** hdr histogram summary; latency values are whole milliseconds (use the 'response' event for finer ones). */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p97_5: number;
      p99: number;
    }

    interface Result {
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      resets: number;
      '2xx': number;
      latency: Histogram;
      requests: Histogram & { sent: number };
      throughput: Histogram;
    }

    interface Instance extends EventEmitter {
      /** statusCode, response bytes, response time in ms (float, from process.hrtime) */
      on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): this;
      on(event: 'reqError', listener: (err: Error) => void): this;
      on(event: string, listener: (...args: unknown[]) => void): this;
      stop(): void;
    }
  }

  function autocannon(opts: autocannon.Options, cb: (err: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export default autocannon;
}
