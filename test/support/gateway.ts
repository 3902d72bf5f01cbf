/**
 * Starts a real Switchyard gateway in-process on a free loopback port, from YAML text, for
 * end-to-end tests. Log lines are captured (not printed) so tests can assert on them.
 */
import { parseConfig } from '../../src/config/load.ts';
import { startServer, type RunningServer } from '../../src/main.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

export interface TestGateway {
  /** http://127.0.0.1:PORT */
  url: string;
  /** http://127.0.0.1:PORT/v1 — what SDKs take as baseURL */
  baseURL: string;
  /** every JSON log line written so far */
  logs: string[];
  running: RunningServer;
  close(): Promise<void>;
}

/**
 * `env` goes to the config loader; unless it names one (SWITCHYARD_DB) or the YAML has a
 * `database:`, the gateway's database is an in-memory SQLite one, gone when it closes.
 */
export async function startGateway(yaml: string, env: Record<string, string | undefined> = {}): Promise<TestGateway> {
  const loaded = parseConfig(yaml, 'test.yaml', { SWITCHYARD_DB: /^database:/m.test(yaml) ? undefined : ':memory:', ...env });
  const logs: string[] = [];
  const logger = createLogger('debug', (line) => {
    logs.push(line);
  });
  const running = await startServer(loaded, { logger, port: 0, host: '127.0.0.1' });
  await running.deps.lifecycle.loading;
  return {
    url: running.url,
    baseURL: `${running.url}/v1`,
    logs,
    running,
    close: () => running.close(0),
  };
}
