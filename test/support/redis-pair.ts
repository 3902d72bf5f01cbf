/**
 * Two gateway processes on one fresh redis-server, with a fake OpenAI upstream: what the tests of
 * replicas sharing state through Redis (coalescing, breakers) start in `before` and stop in `after`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeOpenAI, type FakeUpstream } from './fake-openai-upstream.ts';
import { startGatewayProcess, stopGatewayProcess, untilReady, type GatewayProcess } from './gateway-process.ts';
import { RedisServer } from './redis-server.ts';

export interface GatewayPair {
  a: GatewayProcess;
  b: GatewayProcess;
}

export interface RedisPair extends GatewayPair {
  /** the temporary folder of the config files and Redis's pid file */
  dir: string;
  redis: RedisServer;
  up: FakeUpstream;
  /** Stops both gateways, Redis and the upstream; removes `dir`. */
  stop(): Promise<void>;
}

/** One config for both gateways, made of the fake upstream and the Redis url. */
export type PairYaml = (up: FakeUpstream, redisUrl: string) => string;

/**
 * Starts two gateway processes on `yaml` (written as `<name>-a.yaml`, `<name>-b.yaml` in `dir`) and
 * waits until both are ready with their store connected (`untilReady`); when either fails, both
 * are stopped before the failure is thrown.
 */
export async function startGatewayPair(dir: string, name: string, yaml: string): Promise<GatewayPair> {
  const [a, b] = await Promise.allSettled([startGatewayProcess(join(dir, `${name}-a.yaml`), yaml), startGatewayProcess(join(dir, `${name}-b.yaml`), yaml)]);
  const started = { a: a.status === 'fulfilled' ? a.value : undefined, b: b.status === 'fulfilled' ? b.value : undefined };
  try {
    if (a.status === 'rejected') throw a.reason;
    if (b.status === 'rejected') throw b.reason;
    await Promise.all([untilReady(a.value), untilReady(b.value)]);
    return { a: a.value, b: b.value };
  } catch (err) {
    await stopGatewayPair(started);
    throw err;
  }
}

/** Stops both (SIGTERM, then SIGKILL); either may be undefined (never started). */
export async function stopGatewayPair(p: Partial<GatewayPair> | undefined): Promise<void> {
  await Promise.all([stopGatewayProcess(p?.a), stopGatewayProcess(p?.b)]);
}

/**
 * A fresh redis-server and fake upstream, and two gateways on `yaml(up, redis.url)`; whatever was
 * started is stopped again when a later step fails.
 */
export async function startRedisPair(name: string, yaml: PairYaml): Promise<RedisPair> {
  const dir = mkdtempSync(join(tmpdir(), `switchyard-${name}-`));
  let redis: RedisServer | undefined;
  let up: FakeUpstream | undefined;
  let pair: GatewayPair | undefined;
  const stop = async (): Promise<void> => {
    await stopGatewayPair(pair);
    await redis?.stop();
    await up?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    redis = await RedisServer.start(dir);
    up = await startFakeOpenAI();
    pair = await startGatewayPair(dir, name, yaml(up, redis.url));
  } catch (err) {
    await stop();
    throw err;
  }
  return { ...pair, dir, redis, up, stop };
}
