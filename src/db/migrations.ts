/**
 * The database's versioned migrations, run in name order at start-up (database.ts) by Kysely's
 * migrator, which records each one in `kysely_migration` and holds a lock while it runs, so two
 * replicas starting at once migrate once. A migration that has shipped is never edited: a change
 * is a new one after it. Each is written once for both dialects; where they differ (auto-numbered
 * ids, index kinds) it asks which it runs on.
 */
import { sql, type Kysely, type Migration } from 'kysely';

export type Dialect = 'sqlite' | 'postgres';

function records(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      const identity = dialect === 'postgres';
      await db.schema
        .createTable('teams')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('models', 'text')
        .addColumn('limits', 'text')
        .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('team_id', 'text', (c) => c.references('teams.id'))
        .addColumn('user_id', 'text')
        .addColumn('hash', 'text', (c) => c.notNull().unique())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('previous_hash', 'text')
        .addColumn('previous_until', 'bigint')
        .addColumn('models', 'text')
        .addColumn('limits', 'text')
        .addColumn('cache_namespace', 'text')
        .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('expires_at', 'bigint')
        .addColumn('revoked_at', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('keys_team').on('keys').column('team_id').execute();
      await db.schema.createIndex('keys_previous_hash').on('keys').column('previous_hash').execute();

      await db.schema
        .createTable('names')
        .addColumn('id', 'integer', (c) => (identity ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey()))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addUniqueConstraint('names_kind_name', ['kind', 'name'])
        .execute();

      // no key of its own: rows are appended and read by key and time, and deleted by time
      await db.schema
        .createTable('spend')
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('key_ref', 'integer')
        .addColumn('team_ref', 'integer')
        .addColumn('model_ref', 'integer', (c) => c.notNull())
        .addColumn('backend_ref', 'integer')
        .addColumn('upstream_ref', 'integer')
        .addColumn('tokens_in', 'integer', (c) => c.notNull())
        .addColumn('tokens_out', 'integer', (c) => c.notNull())
        .addColumn('tokens_cached', 'integer', (c) => c.notNull())
        .addColumn('cost_micros', 'bigint')
        .addColumn('latency_ms', 'integer', (c) => c.notNull())
        .addColumn('status', 'smallint', (c) => c.notNull())
        .addColumn('request_id', 'text', (c) => c.notNull())
        .execute();
      // A key's requests over a time range. Totals per team, model or period come from spend_daily.
      await db.schema.createIndex('spend_key_at').on('spend').columns(['key_ref', 'at']).execute();
      // Time ranges and retention. Rows arrive in time order, so Postgres keeps a block-range index
      // (a few pages for millions of rows); SQLite has only B-trees.
      if (dialect === 'postgres') await sql`create index spend_at on spend using brin (at)`.execute(db);
      else await db.schema.createIndex('spend_at').on('spend').column('at').execute();

      await db.schema
        .createTable('spend_daily')
        .addColumn('day', 'integer', (c) => c.notNull())
        .addColumn('key_ref', 'integer', (c) => c.notNull())
        .addColumn('team_ref', 'integer', (c) => c.notNull())
        .addColumn('model_ref', 'integer', (c) => c.notNull())
        .addColumn('requests', 'bigint', (c) => c.notNull())
        .addColumn('errors', 'bigint', (c) => c.notNull())
        .addColumn('tokens_in', 'bigint', (c) => c.notNull())
        .addColumn('tokens_out', 'bigint', (c) => c.notNull())
        .addColumn('tokens_cached', 'bigint', (c) => c.notNull())
        .addColumn('cost_micros', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('spend_daily_pk', ['day', 'key_ref', 'team_ref', 'model_ref'])
        .execute();
      await db.schema.createIndex('spend_daily_key').on('spend_daily').columns(['key_ref', 'day']).execute();
      await db.schema.createIndex('spend_daily_team').on('spend_daily').columns(['team_ref', 'day']).execute();

      await db.schema
        .createTable('stored_responses')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('owner', 'text')
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('stored_responses_expires').on('stored_responses').column('expires_at').execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const t of ['stored_responses', 'spend_daily', 'spend', 'names', 'keys', 'teams']) await db.schema.dropTable(t).execute();
    },
  };
}

/** Every migration by name; names sort in the order they run. */
export function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '0001_records': records(dialect),
  };
}

/** The database server's version line, for the start-up log. */
export async function serverVersion<T>(db: Kysely<T>, dialect: Dialect): Promise<string> {
  const q = dialect === 'sqlite' ? sql<{ v: string }>`select 'SQLite ' || sqlite_version() as v` : sql<{ v: string }>`select version() as v`;
  const r = await q.execute(db);
  return r.rows[0]?.v ?? 'unknown';
}
