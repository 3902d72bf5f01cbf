/**
 * The gateway's database: an embedded SQLite file (better-sqlite3, WAL) or PostgreSQL (pg), behind
 * one Kysely query layer, migrated at open (migrations.ts). Only the records live here (schema.ts);
 * nothing on a request's path waits for it: keys and budgets are read into memory, and the ledger
 * is written behind in batches.
 *
 * SQLite runs in the opening process. better-sqlite3 answers synchronously, so each statement holds
 * the event loop while it runs: writes go in batches inside one transaction, reads are indexed.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { Kysely, Migrator, PostgresDialect, sql, SqliteDialect, type MigrationResultSet } from 'kysely';
import type { DatabaseConfig } from '../config/schema.ts';
import { migrations, serverVersion, type Dialect } from './migrations.ts';
import type { Database as Tables } from './schema.ts';

const require = createRequire(import.meta.url);

/** Postgres type ids read as JavaScript numbers: int8 (BIGINT, COUNT) and numeric (SUM of BIGINT). */
const INT8 = 20;
const NUMERIC = 1700;

export interface OpenedDatabase {
  readonly db: Kysely<Tables>;
  readonly dialect: Dialect;
  /** where it is, for logs: the file, or the Postgres host and database (never the password) */
  readonly location: string;
  /** the server's version line */
  readonly version: string;
  /** the migrations this open applied (none when the schema was current) */
  readonly applied: string[];
  close(): Promise<void>;
}

export class DatabaseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseError';
  }
}

/** `postgres://user:secret@host:5432/db` → `postgres://user@host:5432/db`. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = '';
    return u.toString().replace(/:@/, '@');
  } catch {
    return 'postgres://(unparseable URL)';
  }
}

function sqlite(cfg: Extract<DatabaseConfig, { type: 'sqlite' }>): { kysely: Kysely<Tables>; location: string } {
  const path = cfg.path ?? 'switchyard.db';
  type BetterSqlite = typeof import('better-sqlite3');
  const BetterSqlite3 = require('better-sqlite3') as BetterSqlite;
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const conn = new BetterSqlite3(path);
  if (path !== ':memory:') conn.pragma('journal_mode = WAL');
  // WAL with synchronous=NORMAL: a power cut may lose the last commits, never corrupt the file
  conn.pragma('synchronous = NORMAL');
  conn.pragma('busy_timeout = 5000');
  conn.pragma('foreign_keys = ON');
  return { kysely: new Kysely<Tables>({ dialect: new SqliteDialect({ database: conn }) }), location: path };
}

function postgres(cfg: Extract<DatabaseConfig, { type: 'postgres' }>): { kysely: Kysely<Tables>; location: string } {
  type Pg = typeof import('pg');
  const pg = require('pg') as Pg;
  const pool = new pg.Pool({
    connectionString: cfg.url,
    max: cfg.pool_size,
    connectionTimeoutMillis: 5000,
    application_name: 'switchyard',
    statement_timeout: cfg.statement_timeout_ms,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8 || oid === NUMERIC ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // A connection the server cuts (a restart, a failover) emits 'error' on its client, in use or
  // idle; unheard, that would end the process. The query in flight fails on its own, and the pool
  // replaces the client.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return { kysely: new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) }), location: redactUrl(cfg.url) };
}

/** Opens the configured database and brings its schema up to date. */
export async function openDatabase(cfg: DatabaseConfig): Promise<OpenedDatabase> {
  const dialect: Dialect = cfg.type;
  let opened: { kysely: Kysely<Tables>; location: string };
  try {
    opened = dialect === 'sqlite' ? sqlite(cfg as Extract<DatabaseConfig, { type: 'sqlite' }>) : postgres(cfg as Extract<DatabaseConfig, { type: 'postgres' }>);
  } catch (err) {
    throw new DatabaseError(`database: cannot open ${cfg.type === 'sqlite' ? (cfg.path ?? 'switchyard.db') : redactUrl(cfg.url)}: ${(err as Error).message}`, { cause: err });
  }
  const { kysely, location } = opened;
  try {
    const version = await serverVersion(kysely, dialect);
    const applied = await migrate(kysely, dialect);
    return { db: kysely, dialect, location, version, applied, close: () => kysely.destroy() };
  } catch (err) {
    await kysely.destroy().catch(() => {});
    if (err instanceof DatabaseError) throw err;
    throw new DatabaseError(`database: ${location}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Runs the migrations not yet applied, in order; throws naming the one that failed. Postgres: the
 * migrator's lock table serialises replicas. SQLite: its adapter takes no lock (it assumes one
 * connection), so the whole run is one `BEGIN IMMEDIATE` transaction: a second opener waits for
 * the write lock, then finds the schema current; a failed migration leaves nothing behind.
 */
async function migrate(db: Kysely<Tables>, dialect: Dialect): Promise<string[]> {
  const all = migrations(dialect);
  const run = async (on: Kysely<Tables>): Promise<string[]> => {
    const { error, results }: MigrationResultSet = await new Migrator({ db: on, provider: { getMigrations: () => Promise.resolve(all) } }).migrateToLatest();
    if (error !== undefined) {
      const failed = results?.find((r) => r.status === 'Error');
      const why = error instanceof Error ? error.message : String(error);
      throw new DatabaseError(`migration ${failed?.migrationName ?? '(none started)'} failed: ${why}`, { cause: error });
    }
    return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  };
  if (dialect === 'postgres') return run(db);
  return db.connection().execute(async (conn) => {
    await sql`begin immediate`.execute(conn);
    try {
      const applied = await run(conn);
      await sql`commit`.execute(conn);
      return applied;
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => {});
      throw err;
    }
  });
}
