/**
 * The set-up most end-to-end suites share: a few fake OpenAI-compatible upstreams, a gateway
 * configured to use them, and per-suite extras (SDK clients …) built once both are up.
 *
 * Called synchronously inside a `describe`, it registers that suite's hooks itself:
 *   - `before`: starts the upstreams one by one in the order given, then the gateway from
 *     `yaml(upstreams)`, then `extras`;
 *   - `afterEach` (or `beforeEach`, with `reset: 'beforeEach'`): resets every upstream;
 *   - `after`: closes the gateway first, then the upstreams in order; only what was started, so a
 *     failed `before` does not make it throw as well.
 * It returns an object whose fields (one per upstream, `gw`, and the extras) are there once the
 * suite's `before` has run (reading an upstream or `gw` earlier throws a clear error):
 *
 *   const ctx = upstreamsWithGateway({
 *     upstreams: { fakeA: { apiKey: KEY_A }, fakeB: { apiKey: KEY_B } },
 *     yaml: ({ fakeA, fakeB }) => `backends: { a: { type: openai, base_url: "${fakeA.url}" } } …`,
 *     extras: ({ gw }) => ({ client: sdk(gw) }),
 *   });
 *   test('…', async () => { ctx.fakeA.enqueue(…); await ask(ctx.client, 'm'); … });
 */
import { after, afterEach, before, beforeEach } from 'node:test';
import { startFakeOpenAI, type FakeOpenAIOptions, type FakeUpstream } from './fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './gateway.ts';

/** The upstreams by name (`gw` is taken by the gateway). */
export type Upstreams<K extends string> = { readonly [name in K]: FakeUpstream };

export type Started<K extends string> = Upstreams<K> & { readonly gw: TestGateway };

export type Suite<K extends string, E extends object> = Started<K> & Readonly<E>;

export interface SuiteOptions<K extends string, E extends object> {
  /** one fake upstream per name, started with these options */
  upstreams: Record<K, FakeOpenAIOptions>;
  /** the gateway's YAML, given the started upstreams (for their URLs) */
  yaml: (upstreams: Upstreams<K>) => string;
  /** environment for `${VAR}` in the YAML (startGateway's second argument) */
  env?: Record<string, string | undefined>;
  /** extra fields for the suite object, built once the upstreams and the gateway are up */
  extras?: (started: Started<K>) => E;
  /** when the upstreams are reset: after each test (default) or before each test */
  reset?: 'afterEach' | 'beforeEach';
}

export function upstreamsWithGateway<K extends string, E extends object = Record<never, never>>(opts: SuiteOptions<K, E>): Suite<K, E> {
  const names = Object.keys(opts.upstreams) as K[];
  const fields = new Map<string, unknown>();
  const suite = {};
  const field = (name: string): void => {
    if (Object.hasOwn(suite, name)) throw new Error(`suite field "${name}" is defined twice`);
    Object.defineProperty(suite, name, {
      enumerable: true,
      get: () => {
        if (!fields.has(name)) throw new Error(`suite field "${name}" is used before the suite's before hook has set it up`);
        return fields.get(name);
      },
    });
  };
  for (const name of [...names, 'gw']) field(name);

  const started: FakeUpstream[] = [];
  let gw: TestGateway | undefined;

  before(async () => {
    const upstreams: Partial<Record<K, FakeUpstream>> = {};
    for (const name of names) {
      const up = await startFakeOpenAI(opts.upstreams[name]);
      started.push(up);
      upstreams[name] = up;
      fields.set(name, up);
    }
    const ups = upstreams as Upstreams<K>;
    gw = await startGateway(opts.yaml(ups), opts.env);
    fields.set('gw', gw);
    for (const [name, value] of Object.entries(opts.extras?.({ ...ups, gw }) ?? {})) {
      field(name);
      fields.set(name, value);
    }
  });

  const reset = (): void => {
    for (const up of started) up.reset();
  };
  if (opts.reset === 'beforeEach') beforeEach(reset);
  else afterEach(reset);

  after(async () => {
    await gw?.close();
    for (const up of started) await up.close();
  });

  return suite as Suite<K, E>;
}
