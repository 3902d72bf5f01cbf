/**
 * The set-up and the one exchange of the translation properties (test/translation-*.test.ts): a
 * scripted upstream speaking every backend protocol, a gateway with one model per backend, and
 * `exercise`, which sends a scenario's request through the real HTTP path and checks what the
 * client receives (raw, and through the SDK accumulator when the scenario asks) and what the
 * upstream received.
 *
 * Budget: FUZZ_RUNS runs per property (default `defaultRuns`) with seed FUZZ_SEED. When FUZZ_RUNS
 * is set without FUZZ_SEED (`npm run fuzz`) the seed is random; it is printed at the start, and
 * fast-check's report of a failure names it with the shrunk counterexample and its path.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import fc from 'fast-check';
import { startGateway, type TestGateway } from './gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './scripted-upstream.ts';
import { assertWellFormed, NASTY_FRAMINGS, nastyScenario, scenario, type Backend, type Ingress, type Scenario } from './translation-arbitraries.ts';
import { checkObserved, checkUpstreamRequest } from './translation-check.ts';
import {
  bodyText,
  emptyObserved,
  parseSse,
  readChatJson,
  readChatStream,
  readMessage,
  readMessagesStream,
  readResponse,
  readResponsesStream,
  type Json,
  type Observed,
} from './translation-client.ts';
import { PATHS, requestBody } from './translation-requests.ts';
import { readWithSdk, sdkClients, type SdkClients } from './translation-sdk.ts';

export const MODELS: Record<Backend, string> = { openai: 'via-openai', anthropic: 'via-anthropic', responses: 'via-native-responses', llama: 'via-llama' };

export interface Harness {
  gw: TestGateway;
  up: ScriptedUpstream;
  sdk: SdkClients;
}

/** Starts the upstream and the gateway for the file (before), stops them (after). */
export function translationHarness(): { get(): Harness } {
  let h: Harness | undefined;
  let up: ScriptedUpstream | undefined;
  before(async () => {
    up = await startScriptedUpstream();
    const u = up.url;
    const gw = await startGateway(`
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
backends:
  oai: { type: openai, base_url: "${u}/v1", api_key: sk-scripted }
  ant: { type: anthropic, base_url: "${u}/anthropic", api_key: sk-ant-scripted }
  native: { type: openai, base_url: "${u}/native/v1", api_key: sk-scripted, responses: true }
  llama: { type: llamacpp, base_url: "${u}/llama", slots_poll_ms: 60000, load_timeout_ms: 5000 }
models:
  ${MODELS.openai}: { targets: [ { backend: oai, model: up-chat } ] }
  ${MODELS.anthropic}: { targets: [ { backend: ant, model: claude-scripted } ] }
  ${MODELS.responses}: { targets: [ { backend: native, model: up-responses } ] }
  ${MODELS.llama}: { targets: [ { backend: llama, model: tiny } ] }
`);
    h = { gw, up, sdk: sdkClients(gw.url) };
  });
  after(async () => {
    await h?.gw.close();
    await up?.close();
  });
  return {
    get: () => {
      assert.ok(h, 'the harness is started in before()');
      return h;
    },
  };
}

const envInt = (name: string): number | undefined => {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, not ${v}`);
  return n;
};

/** The fixed seed of `npm test`'s run. */
const FIXED_SEED = 0x5eed33;
const runsFromEnv = envInt('FUZZ_RUNS');
export const FUZZ_SEED = envInt('FUZZ_SEED') ?? (runsFromEnv === undefined ? FIXED_SEED : (Math.random() * 2 ** 31) | 0);
if (runsFromEnv !== undefined) console.log(`translation fuzz: FUZZ_SEED=${FUZZ_SEED} FUZZ_RUNS=${runsFromEnv}`);

/** fast-check's parameters for a property with `defaultRuns` runs in `npm test`. */
export function budget(defaultRuns: number): fc.Parameters<[Scenario]> {
  return { seed: FUZZ_SEED, numRuns: runsFromEnv ?? defaultRuns };
}

/** A per-test timeout that grows with the number of runs (shrinking included). */
export function timeoutFor(defaultRuns: number): number {
  return 60_000 + (runsFromEnv ?? defaultRuns) * 2_000;
}

async function post(h: Harness, ingress: Ingress, body: Json): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (ingress === 'messages') headers['anthropic-version'] = '2023-06-01';
  const res = await fetch(`${h.gw.url}${PATHS[ingress]}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, text: await bodyText(res) };
}

/** GET /v1/responses/{id}: the stored response (a stream's is stored as it ends, so wait briefly). */
async function stored(h: Harness, id: string): Promise<Json> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${h.gw.baseURL}/responses/${encodeURIComponent(id)}`);
    const text = await bodyText(res);
    if (res.status === 200) return JSON.parse(text) as Json;
    if (res.status !== 404 || i >= 100) assert.fail(`GET /v1/responses/${id}: ${res.status} ${text}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function read(ingress: Ingress, stream: boolean, text: string, o: Observed): void {
  if (stream) {
    const events = parseSse(text);
    if (ingress === 'chat' || ingress === 'completions') readChatStream(ingress, events, o);
    else if (ingress === 'responses') readResponsesStream(events, o);
    else readMessagesStream(events, o);
    return;
  }
  const body = JSON.parse(text) as Json;
  if (ingress === 'chat' || ingress === 'completions') readChatJson(ingress, body, o);
  else if (ingress === 'responses') readResponse('response', body, o);
  else readMessage('message', body, o);
}

/** One exchange: the scenario's request through the gateway, and every check on it. */
export async function exercise(h: Harness, ingress: Ingress, backend: Backend, stream: boolean, sc: Scenario): Promise<void> {
  const { prompt: p, answer: a } = sc;
  for (const s of [p.system, p.user, p.history?.result ?? '', ...a.text]) assertWellFormed(s, 'scenario');
  h.up.reset();
  h.up.enqueue(a);
  const body = requestBody(ingress, MODELS[backend], p, a, stream);
  const res = await post(h, ingress, body);
  assert.equal(res.status, 200, `the gateway answered ${res.status}: ${res.text}`);
  const o = emptyObserved();
  read(ingress, stream, res.text, o);
  if (ingress === 'responses') {
    assert.ok(o.responseId, 'the response has an id');
    readResponse('stored response', await stored(h, o.responseId), o);
  }
  checkObserved(ingress, backend, stream, sc, o);
  checkUpstreamRequest(ingress, p, h.up.requests[0]);
  if (stream && sc.sdk) {
    h.up.enqueue(a);
    const viaSdk = await readWithSdk(h.sdk, ingress, body);
    if (viaSdk) checkObserved(ingress, backend, stream, sc, viaSdk);
  }
}

/** One property test: `ingress` served by `backend`, JSON or streamed. */
export function pairProperty(harness: { get(): Harness }, ingress: Ingress, backend: Backend, stream: boolean, defaultRuns: number): void {
  it(`${ingress} × ${backend}, ${stream ? 'stream' : 'JSON'}: text, tool calls and usage come back exact`, { timeout: timeoutFor(defaultRuns) }, async () => {
    const h = harness.get();
    await fc.assert(
      fc.asyncProperty(scenario(ingress, backend), (sc) => exercise(h, ingress, backend, stream, sc)),
      budget(defaultRuns),
    );
  });
}

/** A hand-written case (a shrunk counterexample kept as a regression test). */
export function regression(harness: { get(): Harness }, name: string, ingress: Ingress, backend: Backend, stream: boolean, sc: Scenario): void {
  it(`${ingress} × ${backend}, ${stream ? 'stream' : 'JSON'}: ${name}`, () => exercise(harness.get(), ingress, backend, stream, sc));
}

/** Every NASTY fragment at once, in each JSON spelling, JSON and stream, through `ingress` × `backend`. */
export function nastyCase(harness: { get(): Harness }, ingress: Ingress, backend: Backend): void {
  it(`${ingress} × ${backend}: every nasty fragment at once, in 150 byte pieces, in each JSON spelling`, async () => {
    for (const framing of NASTY_FRAMINGS) {
      for (const stream of [false, true]) await exercise(harness.get(), ingress, backend, stream, nastyScenario(framing, ingress, backend));
    }
  });
}
