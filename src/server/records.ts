/**
 * The gateway's records for its whole life (they outlive config reloads, like the metrics): the
 * database (`database:`), opened and migrated before the listener opens, and the spend ledger
 * (`spend:`) that every answered request is recorded in, written behind. Old ledger rows are
 * pruned at start and hourly. `close()` writes what is buffered, then closes the database.
 */
import type { Config } from '../config/schema.ts';
import { openDatabase, type OpenedDatabase } from '../db/database.ts';
import { SpendLedger } from '../db/ledger.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';

const PRUNE_EVERY_MS = 3_600_000;
const DAY_MS = 86_400_000;

export interface Records {
  readonly database: OpenedDatabase;
  readonly ledger: SpendLedger;
  close(): Promise<void>;
}

export async function openRecords(config: Config, logger: Logger, metrics: Metrics): Promise<Records> {
  const database = await openDatabase(config.database);
  logger.info('database', { type: database.dialect, location: database.location, version: database.version, migrations_applied: database.applied.join(',') || undefined });
  const spend = config.spend;
  const ledger = new SpendLedger(database.db, {
    flushMs: spend.flush_ms,
    batchRows: spend.batch_rows,
    maxBufferedRows: spend.max_buffered_rows,
    onDropped: (n) => metrics.ledgerDropped.inc(n),
    onFlushError: (err) => {
      metrics.ledgerFlushFailures.inc();
      logger.warn('spend ledger: write failed, rows kept for the next flush', { error: err instanceof Error ? err.message : String(err), buffered: ledger.stats.buffered });
    },
  });
  metrics.setLedgerSource(() => ledger.stats.buffered);
  const prune = async (): Promise<void> => {
    try {
      const n = await ledger.prune(Date.now() - spend.retention_days * DAY_MS, database.dialect);
      if (n > 0) logger.info('spend ledger: old rows pruned', { rows: n, retention_days: spend.retention_days });
    } catch (err) {
      logger.warn('spend ledger: pruning failed', { error: err instanceof Error ? err.message : String(err) });
    }
  };
  void prune();
  const timer = setInterval(() => void prune(), PRUNE_EVERY_MS);
  timer.unref();
  return {
    database,
    ledger,
    close: async () => {
      clearInterval(timer);
      const complete = await ledger.close();
      if (!complete) logger.error('spend ledger: rows not written at shutdown', { rows: ledger.stats.buffered });
      await database.close();
    },
  };
}
