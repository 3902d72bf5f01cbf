/**
 * Loads providers.yaml: YAML → `${VAR}` interpolation → strict zod schema → cross-references →
 * PORT/HOST overrides. Every problem is collected and reported at once, one line each, naming its
 * path, in file order; secret values are never part of a message.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { isScalar, LineCounter, parseDocument, visit } from 'yaml';
import { interpolate, joinPath } from './interpolate.ts';
import { fromZod, isRecord, kindOf, pathOf } from './messages.ts';
import { highestPlaceholder, isPattern, starCount } from './model-names.ts';
import {
  configSchema,
  defaultPrice,
  PLANNED_BACKEND_TYPES,
  PLANNED_POLICIES,
  POLICIES,
  SUPPORTED_BACKEND_TYPES,
  type Config,
} from './schema.ts';

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface LoadedConfig {
  config: Config;
  /** Where it came from, as the user named it. */
  source: string;
  /** Non-fatal findings to print at start-up. */
  warnings: string[];
  /** Backends whose api_key came out empty: they answer a clear error instead of calling out. */
  unconfiguredBackends: Set<string>;
}

type Env = Readonly<Record<string, string | undefined>>;

/** The SQLite database's file: `given` (or switchyard.db) beside the config file unless absolute; `:memory:` as it is. */
export function sqlitePath(given: string | undefined, configSource: string): string {
  const p = given ?? 'switchyard.db';
  return p === ':memory:' || isAbsolute(p) ? p : resolve(dirname(configSource), p);
}

/** `--config FILE` beats `SWITCHYARD_CONFIG` beats `./providers.yaml`. */
export function configPathFrom(argv: readonly string[], env: Env): string {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--config' || a === '-c') {
      const next = argv[i + 1];
      if (next === undefined || next === '') throw new ConfigError(['--config needs a file name']);
      return next;
    }
    if (a?.startsWith('--config=')) {
      const file = a.slice('--config='.length);
      if (file === '') throw new ConfigError(['--config needs a file name']);
      return file;
    }
  }
  return env.SWITCHYARD_CONFIG || 'providers.yaml';
}

export function loadConfigFile(path: string, env: Env = process.env): LoadedConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'file not found' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'is a directory' : 'cannot be read';
    throw new ConfigError([`${path}: ${why}`]);
  }
  return parseConfig(text, path, env);
}

/** Where `path` sits in the file, as sibling indexes from the root; for sorting problems in file order. */
function positionOf(path: string, root: unknown): number[] {
  const out: number[] = [];
  let node = root;
  let rest = path;
  while (rest !== '') {
    if (Array.isArray(node)) {
      const m = /^\[(\d+)\]/.exec(rest);
      if (!m) break;
      out.push(Number(m[1]));
      node = node[Number(m[1])];
      rest = rest.slice(m[0].length);
    } else if (isRecord(node)) {
      const keys = Object.keys(node);
      let best = -1;
      keys.forEach((k, i) => {
        if ((rest === k || rest.startsWith(`${k}.`) || rest.startsWith(`${k}[`)) && k.length > (keys[best]?.length ?? -1)) best = i;
      });
      const key = keys[best];
      if (key === undefined) break;
      out.push(best);
      node = node[key];
      rest = rest.slice(key.length);
    } else break;
    if (rest.startsWith('.')) rest = rest.slice(1);
  }
  if (rest !== '') out.push(Infinity); // a missing field: after what is there
  return out;
}

function compareSeq(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return (a[i] ?? 0) - (b[i] ?? 0);
  return a.length - b.length;
}

/** The parsed YAML, or its syntax problems, each with line:col. */
function yamlProblems(text: string, source: string): { problems: string[] } | { raw: unknown } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  const at = (offset: number): string => {
    const { line, col } = lineCounter.linePos(offset);
    return `${source}:${line}:${col}`;
  };
  const problems = doc.errors.map((e) => {
    let msg = e.message.split('\n')[0] ?? 'invalid YAML';
    if (e.code === 'DUPLICATE_KEY') {
      let key: string | undefined;
      visit(doc, {
        Pair(_, pair) {
          if (isScalar(pair.key) && pair.key.range?.[0] === e.pos[0]) {
            key = String(pair.key.value);
            return visit.BREAK;
          }
          return undefined;
        },
      });
      msg = key === undefined ? 'duplicate key' : `duplicate key "${key}"`;
    } else if (e.code === 'MULTIPLE_DOCS') {
      msg = 'more than one YAML document ("---"): the config must be a single document';
    }
    return `${at(e.pos[0])}: ${msg}`;
  });
  visit(doc, {
    Alias(_, alias) {
      if (alias.resolve(doc) === undefined) problems.push(`${at(alias.range?.[0] ?? 0)}: alias "*${alias.source}" has no anchor "&${alias.source}" before it`);
    },
  });
  if (problems.length > 0) return { problems };
  try {
    return { raw: doc.toJS() };
  } catch (err) {
    return { problems: [`${source}: ${err instanceof Error ? err.message : String(err)}`] };
  }
}

export function parseConfig(text: string, source: string, env: Env = process.env): LoadedConfig {
  const yaml = yamlProblems(text, source);
  if ('problems' in yaml) throw new ConfigError(yaml.problems);
  const raw = yaml.raw;
  if (raw === null || raw === undefined) throw new ConfigError([`${source}: is empty; it needs at least "backends" and "models"`]);
  if (!isRecord(raw)) {
    throw new ConfigError([`${source}: must be a mapping with at least "backends" and "models", not ${kindOf(raw)}`]);
  }

  const found: Array<{ path: string; msg: string; env?: boolean }> = [];
  const interp = interpolate(raw, env);
  const interpPaths = new Set(interp.problems.map((p) => p.path));
  const at = (path: string, msg: string): void => {
    // A value whose variable is missing was already reported; what it turned into is noise.
    if (interpPaths.has(path)) return;
    found.push({ path, msg });
  };
  for (const p of interp.problems) found.push({ path: p.path, msg: p.message });

  // Name unimplemented and unknown backend types plainly, before the schema's generic message.
  const tree = interp.value as Record<string, unknown>;
  const backendsRaw = tree.backends;
  const backendNames = isRecord(backendsRaw) ? Object.keys(backendsRaw) : [];
  if (isRecord(backendsRaw)) {
    for (const [bname, b] of Object.entries(backendsRaw)) {
      const type = isRecord(b) ? b.type : undefined;
      if (type === undefined) continue; // the schema reports the missing field
      const path = joinPath(joinPath('backends', bname), 'type');
      if ((PLANNED_BACKEND_TYPES as readonly unknown[]).includes(type)) {
        at(path, `backend type "${String(type)}" is not supported by this version yet (supported: ${SUPPORTED_BACKEND_TYPES.join(', ')})`);
      } else if (!(SUPPORTED_BACKEND_TYPES as readonly unknown[]).includes(type)) {
        at(path, `unknown backend type "${String(type)}" (known: ${SUPPORTED_BACKEND_TYPES.join(', ')})`);
      } else continue;
      delete backendsRaw[bname]; // reported; the schema would only repeat it less clearly
    }
  }

  expandAliases(tree, at);
  const parsed = configSchema.safeParse(tree);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      for (const [segs, msg] of fromZod(issue, tree)) {
        const path = pathOf(segs);
        at(path, interp.emptyPaths.has(path) ? `${msg} (it is empty because its variable is unset)` : msg);
      }
    }
  }

  // Cross-references and rules the schema cannot express, checked on the raw tree so that they are
  // reported together with the schema's problems.
  const known = backendNames.length > 0 ? backendNames.join(', ') : 'none defined';
  if (isRecord(tree.models)) {
    for (const [mname, m] of Object.entries(tree.models)) {
      if (!isRecord(m)) continue;
      const mpath = joinPath('models', mname);
      const policy = m.policy;
      if (typeof policy === 'string' && !(POLICIES as readonly string[]).includes(policy)) {
        at(
          joinPath(mpath, 'policy'),
          (PLANNED_POLICIES as readonly string[]).includes(policy)
            ? `policy "${policy}" is not supported by this version yet (supported: ${POLICIES.join(', ')})`
            : `unknown policy "${policy}" (known: ${POLICIES.join(', ')})`,
        );
      }
      if (policy === 'weighted' && Array.isArray(m.targets) && m.targets.length > 0) {
        const live = m.targets.some((t: unknown) => !isRecord(t) || t.weight === undefined || (typeof t.weight === 'number' && t.weight > 0));
        if (!live) at(joinPath(mpath, 'targets'), 'policy "weighted" needs at least one target with a weight above 0');
      }
      if (!Array.isArray(m.targets)) continue;
      const stars = starCount(mname);
      m.targets.forEach((t: unknown, i) => {
        const model = isRecord(t) ? t.model : undefined;
        const n = typeof model === 'string' ? highestPlaceholder(model) : -1;
        if (n > stars) {
          const tpath = joinPath(joinPath(joinPath(mpath, 'targets'), i), 'model');
          at(tpath, stars === 0 ? `"\${${n}}" needs a "*" in the model's name to fill it (only \${0}, the whole name, works here)` : `"\${${n}}" has no "*" to fill it (the name has ${stars})`);
        }
      });
      if (!isRecord(backendsRaw)) continue;
      m.targets.forEach((t: unknown, i) => {
        const b = isRecord(t) ? t.backend : undefined;
        if (typeof b === 'string' && b !== '' && !backendNames.includes(b)) {
          at(joinPath(joinPath(joinPath(mpath, 'targets'), i), 'backend'), `unknown backend "${b}" (known: ${known})`);
        }
      });
    }
  }
  if (Array.isArray(tree.keys)) {
    if (tree.keys.length === 0) at('keys', 'is empty: remove it to run without auth, or add at least one key');
    const seenNames = new Set<string>();
    const seenDigests = new Set<string>();
    const modelNames = isRecord(tree.models) ? Object.keys(tree.models) : [];
    tree.keys.forEach((k: unknown, i) => {
      if (!isRecord(k)) return;
      if (typeof k.name === 'string') {
        if (seenNames.has(k.name)) at(`keys[${i}].name`, `duplicate key name "${k.name}"`);
        seenNames.add(k.name);
      }
      const key = typeof k.key === 'string' || typeof k.key === 'number' ? String(k.key) : '';
      const hex = typeof k.key_sha256 === 'string' ? k.key_sha256.toLowerCase() : '';
      if (k.key !== undefined && k.key_sha256 !== undefined) at(`keys[${i}]`, 'has both "key" and "key_sha256": give exactly one');
      else if (k.key === undefined && k.key_sha256 === undefined) at(`keys[${i}]`, 'needs "key" or "key_sha256"');
      const d = key !== '' ? createHash('sha256').update(key, 'utf8').digest('hex') : /^[0-9a-f]{64}$/.test(hex) ? hex : '';
      if (d !== '') {
        if (seenDigests.has(d)) at(`keys[${i}].${key !== '' ? 'key' : 'key_sha256'}`, 'the same key value is used by an earlier entry');
        seenDigests.add(d);
      }
      if (Array.isArray(k.models) && isRecord(tree.models)) {
        k.models.forEach((m: unknown, j) => {
          if (typeof m === 'string' && !modelNames.includes(m)) {
            at(`keys[${i}].models[${j}]`, `unknown model "${m}" (known: ${modelNames.join(', ') || 'none defined'})`);
          }
        });
      }
    });
  }

  // Environment overrides.
  const envProblem = (msg: string): void => void found.push({ path: '', msg, env: true });
  const envPort = env.PORT !== undefined && env.PORT !== '' ? env.PORT : undefined;
  if (envPort !== undefined && (!/^\d{1,5}$/.test(envPort) || Number(envPort) > 65535)) {
    envProblem(`PORT: "${envPort}" is not a port number (0-65535)`);
  }
  const lv = env.LOG_LEVEL || undefined;
  if (lv !== undefined && lv !== 'debug' && lv !== 'info' && lv !== 'warn' && lv !== 'error' && lv !== 'silent') {
    envProblem(`LOG_LEVEL: "${lv}" is not one of debug, info, warn, error, silent`);
  }

  if (found.length > 0 || !parsed.success) {
    const order = found.map((f, i) => ({ f, i, pos: f.env ? [Infinity] : positionOf(f.path, raw) }));
    order.sort((a, b) => compareSeq(a.pos, b.pos) || a.i - b.i);
    throw new ConfigError(order.map(({ f }) => (f.env ? f.msg : f.path === '' ? `${source}: ${f.msg}` : `${source}: ${f.path}: ${f.msg}`)));
  }
  const config = parsed.data;
  if (envPort !== undefined) config.server.port = Number(envPort);
  if (env.HOST !== undefined && env.HOST !== '') config.server.host = env.HOST;
  if (lv === 'debug' || lv === 'info' || lv === 'warn' || lv === 'error' || lv === 'silent') config.logging.level = lv;
  // The SQLite file: SWITCHYARD_DB, else database.path, else switchyard.db; relative to the config file's folder.
  if (config.database.type === 'sqlite') config.database.path = sqlitePath(env.SWITCHYARD_DB || config.database.path, source);
  // Local targets (llama-server, …) without an explicit price cost nothing: see defaultPrice.
  for (const m of Object.values(config.models)) {
    for (const t of m.targets) {
      const b = Object.hasOwn(config.backends, t.backend) ? config.backends[t.backend] : undefined;
      const price = b && !t.price ? defaultPrice(b.type) : undefined;
      if (price) t.price = price;
    }
  }

  const warnings: string[] = [];
  const unconfiguredBackends = new Set<string>();
  for (const [bname, b] of Object.entries(config.backends)) {
    if ((b.type === 'openai' || b.type === 'anthropic') && b.api_key === '') {
      unconfiguredBackends.add(bname);
      const users = Object.entries(config.models)
        .filter(([, m]) => m.targets.some((t) => t.backend === bname))
        .map(([n]) => n);
      const why = interp.emptyPaths.has(joinPath(joinPath('backends', bname), 'api_key')) ? 'its variable is unset' : 'it is empty';
      warnings.push(
        `backend "${bname}" has no api_key (${why}); ${users.length > 0 ? `models ${users.map((u) => `"${u}"`).join(', ')} skip it and answer an error if nothing else serves them` : 'no model uses it'}`,
      );
    }
  }
  if (!config.keys && !isLoopback(config.server.host)) {
    warnings.push(`no "keys" configured and the gateway listens on ${config.server.host}: anyone who can reach it can use it`);
  }
  // A budget can only see spend on priced targets: say which models of a budgeted key have none.
  for (const k of config.keys ?? []) {
    if (k.limits?.budget_usd === undefined) continue;
    const unpriced = Object.entries(config.models)
      .filter(([n]) => !k.models || k.models.includes(n))
      .filter(([, m]) => m.targets.some((t) => !t.price))
      .map(([n]) => `"${n}"`);
    if (unpriced.length > 0) {
      warnings.push(
        `keys: the budget of "${k.name}" counts requests served by targets without a price as 0 USD (models ${unpriced.join(', ')} have such targets): set their price to enforce it`,
      );
    }
  }
  return { config, source, warnings, unconfiguredBackends };
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/**
 * `models.<name>: { alias: <other> }` becomes a copy of the entry it names (followed through other
 * aliases), before the schema sees the tree. An alias names a model without `*`, and is not one.
 */
function expandAliases(tree: Record<string, unknown>, at: (path: string, msg: string) => void): void {
  const models = tree.models;
  if (!isRecord(models)) return;
  const aliasOf = (v: unknown): unknown => (isRecord(v) && Object.keys(v).length === 1 && 'alias' in v ? v.alias : undefined);
  for (const [name, entry] of Object.entries(models)) {
    let target = aliasOf(entry);
    if (target === undefined) continue;
    const path = joinPath(joinPath('models', name), 'alias');
    if (isPattern(name)) {
      at(joinPath('models', name), 'an alias cannot be a pattern (a name with "*")');
      delete models[name];
      continue;
    }
    const seen = new Set([name]);
    let resolved: unknown;
    for (;;) {
      if (typeof target !== 'string' || target === '') {
        at(path, 'must be the name of another model');
        break;
      }
      if (seen.has(target)) {
        at(path, `aliases form a cycle (${[...seen, target].join(' → ')})`);
        break;
      }
      if (!Object.hasOwn(models, target)) {
        at(path, `unknown model "${target}" (known: ${Object.keys(models).filter((k) => aliasOf(models[k]) === undefined).join(', ') || 'none defined'})`);
        break;
      }
      if (isPattern(target)) {
        at(path, `"${target}" is a pattern: an alias names a model without "*"`);
        break;
      }
      seen.add(target);
      const next = aliasOf(models[target]);
      if (next === undefined) {
        resolved = models[target];
        break;
      }
      target = next;
    }
    if (resolved === undefined) delete models[name];
    else models[name] = structuredClone(resolved);
  }
}
