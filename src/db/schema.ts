/**
 * The records the gateway keeps in its database (src/db/migrations.ts creates them): keys and
 * teams, the spend ledger with its daily roll-up, and stored Responses conversations. Times are
 * milliseconds since the epoch; money is integer micro-USD (sums stay exact); lists and limits are
 * JSON text, read back through the config's own schemas. The hot counters (rpm, tpm, concurrency)
 * are not here: they stay in the state store.
 */
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

/** Milliseconds since the epoch: a JavaScript number in, a number out (Postgres BIGINT is read as one). */
type Millis = ColumnType<number, number, number>;

export interface TeamTable {
  /** `team_` and random hex */
  id: string;
  name: string;
  /** JSON array of model names or patterns; null: every model */
  models: string | null;
  /** JSON of the config's `limits` (rpm, tpm, max_concurrent, budget_usd, budget_period); shared by every member key */
  limits: string | null;
  /** JSON object, the operator's own */
  metadata: string;
  created_at: Millis;
  updated_at: Millis;
}

export interface KeyTable {
  /** `key_` and random hex */
  id: string;
  name: string;
  team_id: string | null;
  /** optional: who the key is for */
  user_id: string | null;
  /** hex SHA-256 of the secret; the secret itself is never stored */
  hash: string;
  /** the secret's first characters, to recognise it in a list */
  prefix: string;
  /** a rotated-out secret's hash, accepted until `previous_until` */
  previous_hash: string | null;
  previous_until: Millis | null;
  /** JSON array of model names or patterns; null: every model; []: none */
  models: string | null;
  limits: string | null;
  cache_namespace: string | null;
  metadata: string;
  expires_at: Millis | null;
  revoked_at: Millis | null;
  created_at: Millis;
  updated_at: Millis;
}

/** Names the ledger refers to by number (keys, teams, models, backends, upstream models), so a row stays small. */
export interface NameTable {
  id: Generated<number>;
  kind: 'key' | 'team' | 'model' | 'backend' | 'upstream';
  name: string;
}

/** One answered request. */
export interface SpendTable {
  at: Millis;
  key_ref: number | null;
  team_ref: number | null;
  model_ref: number;
  backend_ref: number | null;
  upstream_ref: number | null;
  tokens_in: number;
  tokens_out: number;
  tokens_cached: number;
  /** null: the serving target has no price */
  cost_micros: number | null;
  latency_ms: number;
  status: number;
  request_id: string;
}

/** The ledger summed per UTC day, key, team and model (0: none). */
export interface SpendDailyTable {
  /** days since the epoch, UTC */
  day: number;
  key_ref: number;
  team_ref: number;
  model_ref: number;
  requests: number;
  errors: number;
  tokens_in: number;
  tokens_out: number;
  tokens_cached: number;
  cost_micros: number;
}

/** A stored Responses API response with its conversation, as the responses store keeps it. */
export interface StoredResponseTable {
  id: string;
  /** the key that stored it; null without client keys */
  owner: string | null;
  /** JSON */
  body: string;
  created_at: Millis;
  expires_at: Millis;
}

export interface Database {
  teams: TeamTable;
  keys: KeyTable;
  names: NameTable;
  spend: SpendTable;
  spend_daily: SpendDailyTable;
  stored_responses: StoredResponseTable;
}

export type Team = Selectable<TeamTable>;
export type NewTeam = Insertable<TeamTable>;
export type TeamUpdate = Updateable<TeamTable>;
export type Key = Selectable<KeyTable>;
export type NewKey = Insertable<KeyTable>;
export type KeyUpdate = Updateable<KeyTable>;
export type NewSpend = Insertable<SpendTable>;
