/**
 * A throwaway PostgreSQL cluster (Debian's `postgresql` package): `initdb` into a temp directory,
 * started with `pg_ctl` on a free loopback port (no Unix socket outside that directory, trust auth
 * on 127.0.0.1 only), stopped and deleted by `stop()`. As root (CI containers) the server runs as
 * the `postgres` user the package creates, since PostgreSQL refuses to run as root.
 * `postgresSkip` says why it cannot run here; in CI a missing server is a failure, never a skip.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net.ts';

/** The folder of initdb / pg_ctl: on PATH, else Debian's versioned one (newest first). */
function binDir(): string | undefined {
  if (spawnSync('initdb', ['--version']).status === 0) return '';
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) if (existsSync(join(base, v, 'bin', 'initdb'))) return join(base, v, 'bin');
  return undefined;
}

const BIN = binDir();
const asRoot = process.getuid?.() === 0;
const pgUser = asRoot ? spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }) : undefined;
const pgUid = pgUser?.status === 0 ? Number(pgUser.stdout.trim()) : undefined;
const pgGid = asRoot ? Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim()) : undefined;

function why(): string | false {
  if (BIN === undefined) return 'PostgreSQL is not installed (apt-get install postgresql; .ci/run does it)';
  if (asRoot && pgUid === undefined) return 'running as root without a postgres user to run the server as';
  return false;
}

export const postgresSkip: string | false = process.env.CI ? false : why();

function run(cmd: string, args: string[]): SpawnSyncReturns<string> {
  const exe = BIN ? join(BIN, cmd) : cmd;
  return asRoot ? spawnSync('runuser', ['-u', 'postgres', '--', exe, ...args], { encoding: 'utf8' }) : spawnSync(exe, args, { encoding: 'utf8' });
}

export class PostgresServer {
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  /** A new cluster with one database, `switchyard`, reachable at `url`. */
  static async start(): Promise<PostgresServer> {
    const problem = why();
    if (problem) throw new Error(problem);
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-pg-'));
    if (asRoot && pgUid !== undefined && pgGid !== undefined) {
      chownSync(dir, pgUid, pgGid);
      chmodSync(dir, 0o700);
    }
    const s = new PostgresServer(await freePort(), dir);
    const init = run('initdb', ['-D', s.data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync']);
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
    const start = run('pg_ctl', ['-D', s.data, '-l', join(dir, 'log'), '-o', s.options, '-w', '-t', '60', 'start']);
    if (start.status !== 0) throw new Error(`pg_ctl start failed: ${start.stderr || start.stdout}`);
    const create = run('createdb', ['-h', '127.0.0.1', '-p', String(s.port), '-U', 'postgres', 'switchyard']);
    if (create.status !== 0) {
      await s.stop();
      throw new Error(`createdb failed: ${create.stderr || create.stdout}`);
    }
    return s;
  }

  private get data(): string {
    return join(this.dir, 'data');
  }

  /** The `switchyard` database's URL (another database of the cluster by name). */
  url(database = 'switchyard'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Creates another empty database in the cluster. */
  createDatabase(name: string): string {
    const r = run('createdb', ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', name]);
    if (r.status !== 0) throw new Error(`createdb ${name} failed: ${r.stderr || r.stdout}`);
    return this.url(name);
  }

  /**
   * Stops the server (the cluster stays), its connections cut, as an outage would. Fast, not
   * immediate: with this test cluster's synchronous_commit=off an immediate stop could lose commits.
   */
  halt(): void {
    const r = run('pg_ctl', ['-D', this.data, '-m', 'fast', '-w', 'stop']);
    if (r.status !== 0) throw new Error(`pg_ctl stop failed: ${r.stderr || r.stdout}`);
  }

  /** Starts it again after halt(), on the same port. */
  resume(): void {
    const r = run('pg_ctl', ['-D', this.data, '-l', join(this.dir, 'log'), '-o', this.options, '-w', '-t', '60', 'start']);
    if (r.status !== 0) throw new Error(`pg_ctl start failed: ${r.stderr || r.stdout}`);
  }

  private get options(): string {
    return `-p ${this.port} -c listen_addresses=127.0.0.1 -k ${this.dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  }

  /** Stops the server at once and deletes the cluster. */
  async stop(): Promise<void> {
    run('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop']);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
