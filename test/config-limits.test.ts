/**
 * The config sections of keys, limits, cache and state: what is accepted, what is refused (one
 * line per problem, naming its path) and the start-up warnings.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { ConfigError, parseConfig } from '../src/config/load.ts';

const SRC = 'providers.yaml';
const OK = 'backends:\n  a: { type: fake }\n  o: { type: openai, base_url: "https://x.example/v1", api_key: k }\nmodels:\n  m: { targets: [ { backend: a, model: x } ] }\n  paid: { targets: [ { backend: o, model: gpt-4o-mini } ] }\n';

function problems(yaml: string): string[] {
  try {
    parseConfig(OK + yaml, SRC, {});
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('keys, limits, cache and state config', () => {
  it('accepts the full shape with defaults filled in', () => {
    const hex = createHash('sha256').update('team-b-secret-key').digest('hex');
    const { config, warnings } = parseConfig(
      OK +
        `keys:
  - { name: a, key: "aaaaaaaa-1", models: [ m ], limits: { rpm: 60, tpm: 1000, max_concurrent: 2, budget_usd: 5 }, cache_namespace: shared-a }
  - { name: b, key_sha256: "${hex.toUpperCase()}" }
limits: { default_max_tokens: 256 }
cache: { enabled: true, ttl_seconds: 60, max_entries: 10, max_bytes: 100000, cache_nonzero_temperature: true, namespace: shared }
state: { store: redis, url: "redis://127.0.0.1:6379/0" }
`,
      SRC,
      {},
    );
    assert.deepEqual(config.keys?.[0]?.limits, { rpm: 60, tpm: 1000, max_concurrent: 2, budget_usd: 5, budget_period: 'month' });
    assert.equal(config.limits.default_max_tokens, 256);
    assert.deepEqual(config.state, { store: 'redis', url: 'redis://127.0.0.1:6379/0', key_prefix: 'switchyard:', on_unavailable: 'open', command_timeout_ms: 500 });
    assert.equal(config.cache.max_entry_bytes, 1024 * 1024);
    assert.equal(config.cache.coalesce, true);
    assert.deepEqual(
      warnings.filter((w) => /not (enforced|implemented|used)/.test(w)),
      [],
      'limits, cache and redis are implemented: no "not enforced yet" warnings',
    );
  });

  it('a key needs exactly one of key and key_sha256', () => {
    assert.deepEqual(problems('keys:\n  - { name: a }\n'), [`${SRC}: keys[0]: needs "key" or "key_sha256"`]);
    const hex = 'a'.repeat(64);
    assert.deepEqual(problems(`keys:\n  - { name: a, key: "aaaaaaaa-1", key_sha256: "${hex}" }\n`), [`${SRC}: keys[0]: has both "key" and "key_sha256": give exactly one`]);
    assert.deepEqual(problems('keys:\n  - { name: a, key_sha256: "abc" }\n'), [`${SRC}: keys[0].key_sha256: must be 64 hex digits (the SHA-256 of the key)`]);
  });

  it('the same key given plainly and as a digest is a duplicate', () => {
    const hex = createHash('sha256').update('aaaaaaaa-1').digest('hex');
    assert.deepEqual(problems(`keys:\n  - { name: a, key: "aaaaaaaa-1" }\n  - { name: b, key_sha256: "${hex}" }\n`), [
      `${SRC}: keys[1].key_sha256: the same key value is used by an earlier entry`,
    ]);
  });

  it('models of a key must exist; limits and cache fields are checked', () => {
    assert.deepEqual(problems('keys:\n  - { name: a, key: "aaaaaaaa-1", models: [ m, nope ] }\n'), [`${SRC}: keys[0].models[1]: unknown model "nope" (known: m, paid)`]);
    assert.deepEqual(problems('keys:\n  - { name: a, key: "aaaaaaaa-1", limits: { budget_usd: 1, budget_period: week } }\n'), [
      `${SRC}: keys[0].limits.budget_period: "week" is not one of day, month`,
    ]);
    assert.deepEqual(problems('cache: { namespace: global }\n'), [`${SRC}: cache.namespace: "global" is not one of per_key, shared`]);
    assert.deepEqual(problems('state: { store: redis, url: "redis://x", on_unavailable: maybe }\n'), [`${SRC}: state.on_unavailable: "maybe" is not one of open, closed`]);
    assert.deepEqual(problems('keys:\n  - { name: a, key: "aaaaaaaa-1", limits: { rpm: 0 } }\n'), [`${SRC}: keys[0].limits.rpm: must be at least 1`]);
  });

  it('warns when a budget cannot see the spend of unpriced targets', () => {
    const { warnings } = parseConfig(OK + 'keys:\n  - { name: a, key: "aaaaaaaa-1", limits: { budget_usd: 5 } }\n', SRC, {});
    assert.deepEqual(warnings, [
      'keys: the budget of "a" counts requests served by targets without a price as 0 USD (models "m", "paid" have such targets): set their price to enforce it',
    ]);
    const scoped = parseConfig(OK + 'keys:\n  - { name: a, key: "aaaaaaaa-1", models: [ m ], limits: { budget_usd: 5 } }\n', SRC, {});
    assert.equal(scoped.warnings.length, 1);
    assert.match(scoped.warnings[0] ?? '', /models "m" have/);
  });
});
