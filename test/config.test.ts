/**
 * providers.yaml loading: a table of broken configs, each with the exact problem lines a user sees
 * when start-up fails, plus the positive cases (interpolation, coercion, overrides, config path).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, configPathFrom, loadConfigFile, parseConfig } from '../src/config/load.ts';

type Env = Record<string, string | undefined>;
const SRC = 'providers.yaml';

function problemsOf(yaml: string, env: Env = {}): string[] {
  try {
    parseConfig(yaml, SRC, env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.equal(err.message, err.problems.join('\n'));
    return err.problems;
  }
  assert.fail('expected the config to be rejected');
}

/** A valid base: one fake backend and one model using it. */
const BACKENDS = 'backends:\n  a: { type: fake }\n';
const MODELS = 'models:\n  m: { targets: [ { backend: a, model: x } ] }\n';
const OK = BACKENDS + MODELS;
const HINT = '(use ${NAME} or ${NAME:-default}; write $${ for a literal "${")';

interface Broken {
  name: string;
  yaml: string;
  env?: Env;
  problems: string[];
}

const broken: Broken[] = [
  {
    name: 'YAML syntax error, with line:col',
    yaml: 'backends:\n  a: { type: fake\nmodels: {}\n',
    problems: [`${SRC}:3:1: Flow map in block collection must be sufficiently indented and end with a }`],
  },
  {
    name: 'several YAML syntax errors at once',
    yaml: 'backends:\n  a:\n    type: fake\n   bad: 1\nmodels:\n  m: [\n',
    problems: [
      `${SRC}:4:1: All mapping items must start at the same column`,
      `${SRC}:7:1: Flow sequence in block collection must be sufficiently indented and end with a ]`,
    ],
  },
  {
    name: 'tab used as indentation',
    yaml: 'backends:\n\ta: 1\n',
    problems: [`${SRC}:2:1: Tabs are not allowed as indentation`],
  },
  {
    name: 'duplicate YAML key, named',
    yaml: 'backends:\n  a: { type: fake }\n  a: { type: fake }\n' + MODELS,
    problems: [`${SRC}:3:3: duplicate key "a"`],
  },
  {
    name: 'alias without an anchor',
    yaml: OK + 'cache: *nope\n',
    problems: [`${SRC}:5:8: alias "*nope" has no anchor "&nope" before it`],
  },
  {
    name: 'more than one YAML document',
    yaml: BACKENDS + '---\n' + MODELS,
    problems: [`${SRC}:3:1: more than one YAML document ("---"): the config must be a single document`],
  },
  {
    name: 'not a mapping (a list)',
    yaml: '- backends\n- models\n',
    problems: [`${SRC}: must be a mapping with at least "backends" and "models", not a list`],
  },
  {
    name: 'not a mapping (a scalar)',
    yaml: 'hello\n',
    problems: [`${SRC}: must be a mapping with at least "backends" and "models", not text`],
  },
  {
    name: 'empty file',
    yaml: '# nothing here\n',
    problems: [`${SRC}: is empty; it needs at least "backends" and "models"`],
  },
  {
    name: 'missing backends and models',
    yaml: 'server: { port: 4000 }\n',
    problems: [`${SRC}: backends: is required`, `${SRC}: models: is required`],
  },
  {
    name: 'backends given as a list',
    yaml: 'backends: [ a ]\n' + MODELS,
    problems: [`${SRC}: backends: must be a mapping, not a list`],
  },
  {
    name: 'backends left empty',
    yaml: 'backends:\n' + MODELS,
    problems: [`${SRC}: backends: is empty (expected a mapping)`],
  },
  {
    name: 'unknown top-level field, with a suggestion',
    yaml: OK + 'cahce: { enabled: true }\n',
    problems: [`${SRC}: cahce: unknown field (did you mean "cache"?)`],
  },
  {
    name: 'unknown field inside a backend, with a suggestion',
    yaml: 'backends:\n  a: { type: openai, base_url: "https://api.example.com/v1", apikey: k }\n' + MODELS,
    problems: [`${SRC}: backends.a.apikey: unknown field (did you mean "api_key"?)`],
  },
  {
    name: 'unknown field with nothing close: the known fields are listed',
    yaml: 'server: { zzzzzz: 1 }\n' + OK,
    problems: [`${SRC}: server.zzzzzz: unknown field (known: host, port, max_body_bytes, shutdown_grace_ms, max_concurrent_requests, headers_timeout_ms, request_timeout_ms, send_timeout_ms, workers)`],
  },
  {
    name: 'port as a string',
    yaml: 'server: { port: abc }\n' + OK,
    problems: [`${SRC}: server.port: must be a number, not text`],
  },
  {
    name: 'port out of range',
    yaml: 'server: { port: 70000 }\n' + OK,
    problems: [`${SRC}: server.port: must be at most 65535`],
  },
  {
    name: 'fractional and zero timeouts',
    yaml: 'backends:\n  a: { type: fake, timeout_ms: 1.5, stream_idle_timeout_ms: 0 }\n' + MODELS,
    problems: [
      `${SRC}: backends.a.timeout_ms: must be a whole number`,
      `${SRC}: backends.a.stream_idle_timeout_ms: must be at least 1`,
    ],
  },
  {
    name: 'base_url not a URL',
    yaml: 'backends:\n  a: { type: openai, base_url: "api.openai.com/v1" }\n' + MODELS,
    problems: [`${SRC}: backends.a.base_url: must be an http(s) URL`],
  },
  {
    name: 'base_url missing',
    yaml: 'backends:\n  a: { type: openai }\n' + MODELS,
    problems: [`${SRC}: backends.a.base_url: is required`],
  },
  {
    name: 'backend type missing',
    yaml: 'backends:\n  a: { base_url: "http://127.0.0.1:8080" }\n' + MODELS,
    problems: [`${SRC}: backends.a.type: is required (one of: openai, anthropic, fake, llamacpp, onnx)`],
  },
  {
    name: 'unknown backend type',
    yaml: 'backends:\n  a: { type: opena1, base_url: "https://api.openai.com/v1" }\n' + MODELS,
    problems: [`${SRC}: backends.a.type: unknown backend type "opena1" (known: openai, anthropic, fake, llamacpp, onnx)`],
  },
  {
    name: 'an onnx backend without model_path, with an unknown pooling and a misspelt field',
    yaml: 'backends:\n  a: { type: onnx, pooling: max, max_lenght: 128 }\n' + MODELS,
    problems: [
      `${SRC}: backends.a.pooling: "max" is not one of mean, cls`,
      `${SRC}: backends.a.max_lenght: unknown field (did you mean "max_length"?)`,
      `${SRC}: backends.a.model_path: is required`,
    ],
  },
  {
    name: 'a backend name that is not allowed',
    yaml: 'backends:\n  "a b": { type: fake }\nmodels:\n  m: { targets: [ { backend: "a b", model: x } ] }\n',
    problems: [`${SRC}: backends: name "a b" must be letters, digits and . _ : / - (starting with a letter or digit)`],
  },
  {
    name: 'a target naming an unknown backend (known names in file order)',
    yaml: [
      'backends:',
      '  openai: { type: openai, base_url: "https://api.openai.com/v1" }',
      '  local: { type: llamacpp, base_url: "http://127.0.0.1:8080" }',
      'models:',
      '  chat:',
      '    targets:',
      '      - { backend: local, model: qwen2.5-7b-instruct }',
      '      - { backend: opena1, model: gpt-4o-mini }',
      '',
    ].join('\n'),
    problems: [
      `${SRC}: models.chat.targets[1].backend: unknown backend "opena1" (known: openai, local)`,
    ],
  },
  {
    name: 'unset ${VAR} names VAR',
    yaml: 'backends:\n  a: { type: openai, base_url: "https://x.example/v1", api_key: "${OPENAI_API_KEY}" }\n' + MODELS,
    problems: [
      `${SRC}: backends.a.api_key: environment variable OPENAI_API_KEY is not set (set it, or write \${OPENAI_API_KEY:-default} to make it optional)`,
    ],
  },
  {
    name: 'a ${VAR} set to the empty string',
    yaml: 'backends:\n  a: { type: openai, base_url: "https://x.example/v1", api_key: "${OPENAI_API_KEY}" }\n' + MODELS,
    env: { OPENAI_API_KEY: '' },
    problems: [
      `${SRC}: backends.a.api_key: environment variable OPENAI_API_KEY is empty (set it, or write \${OPENAI_API_KEY:-default} to make it optional)`,
    ],
  },
  {
    name: 'an unset variable is reported once, not again as a bad value',
    yaml: 'server: { port: "${P}" }\nbackends:\n  a: { type: openai, base_url: "${BASE}" }\n  b: { type: "${T}" }\n' + MODELS,
    problems: [
      `${SRC}: server.port: environment variable P is not set (set it, or write \${P:-default} to make it optional)`,
      `${SRC}: backends.a.base_url: environment variable BASE is not set (set it, or write \${BASE:-default} to make it optional)`,
      `${SRC}: backends.b.type: environment variable T is not set (set it, or write \${T:-default} to make it optional)`,
    ],
  },
  {
    name: 'malformed ${ references',
    yaml: [
      'backends:',
      '  a: { type: openai, base_url: "https://x.example/v1", api_key: "${OPENAI_API_KEY", organization: "${}", project: "${1X}" }',
      '  b: { type: openai, base_url: "https://x.example/v1", api_key: "${OPENAI_API_KEY:default}", organization: "${A:-${B}}" }',
      '  c: { type: openai, base_url: "https://x.example/v1", api_key: "${sk-pasted-key", organization: "${A B}" }',
      MODELS,
    ].join('\n'),
    problems: [
      `${SRC}: backends.a.api_key: "\${OPENAI_API_KEY" is not closed by "}" ${HINT}`,
      `${SRC}: backends.a.organization: empty variable reference "\${}" ${HINT}`,
      `${SRC}: backends.a.project: malformed variable reference: a variable name is letters, digits and _, not starting with a digit ${HINT}`,
      `${SRC}: backends.b.api_key: malformed variable reference "\${OPENAI_API_KEY:…}" ${HINT}`,
      `${SRC}: backends.b.organization: "\${A:-…}": a default cannot contain another \${…} reference`,
      `${SRC}: backends.c.api_key: "\${" is not closed by "}" ${HINT}`,
      `${SRC}: backends.c.organization: malformed variable reference: a variable name is letters, digits and _, not starting with a digit ${HINT}`,
    ],
  },
  {
    name: 'empty targets',
    yaml: BACKENDS + 'models:\n  m: { targets: [] }\n',
    problems: [`${SRC}: models.m.targets: needs at least one target`],
  },
  {
    name: 'targets given as a mapping',
    yaml: BACKENDS + 'models:\n  m: { targets: { backend: a, model: x } }\n',
    problems: [`${SRC}: models.m.targets: must be a list, not a mapping`],
  },
  {
    name: 'a target without a model',
    yaml: BACKENDS + 'models:\n  m: { targets: [ { backend: a } ] }\n',
    problems: [`${SRC}: models.m.targets[0].model: is required`],
  },
  {
    name: 'unknown policy',
    yaml: BACKENDS + 'models:\n  m: { policy: fastest, targets: [ { backend: a, model: x } ] }\n',
    problems: [`${SRC}: models.m.policy: unknown policy "fastest" (known: fallback, weighted, cost, latency)`],
  },
  {
    name: 'weighted policy with every weight 0 (nothing could ever be served)',
    yaml: BACKENDS + 'models:\n  m: { policy: weighted, targets: [ { backend: a, model: x, weight: 0 } ] }\n',
    problems: [`${SRC}: models.m.targets: policy "weighted" needs at least one target with a weight above 0`],
  },
  {
    name: 'duplicate key names',
    yaml: OK + 'keys:\n  - { name: team, key: "aaaaaaaa-1" }\n  - { name: team, key: "aaaaaaaa-2" }\n',
    problems: [`${SRC}: keys[1].name: duplicate key name "team"`],
  },
  {
    name: 'duplicate key values',
    yaml: OK + 'keys:\n  - { name: a, key: "aaaaaaaa-1" }\n  - { name: b, key: "aaaaaaaa-1" }\n',
    problems: [`${SRC}: keys[1].key: the same key value is used by an earlier entry`],
  },
  {
    name: 'key too short',
    yaml: OK + 'keys:\n  - { name: a, key: "short" }\n',
    problems: [`${SRC}: keys[0].key: must be at least 8 characters`],
  },
  {
    name: 'key from an unset ${VAR:-}',
    yaml: OK + 'keys:\n  - { name: a, key: "${TEAM_A_KEY:-}" }\n',
    problems: [`${SRC}: keys[0].key: must be at least 8 characters (it is empty because its variable is unset)`],
  },
  {
    name: 'empty keys list',
    yaml: OK + 'keys: []\n',
    problems: [`${SRC}: keys: is empty: remove it to run without auth, or add at least one key`],
  },
  {
    name: 'misspelt limit field',
    yaml: OK + 'keys:\n  - { name: a, key: "aaaaaaaa-1", limits: { rpms: 5 } }\n',
    problems: [`${SRC}: keys[0].limits.rpms: unknown field (did you mean "rpm"?)`],
  },
  {
    name: 'bad redis url',
    yaml: OK + 'state: { store: redis, url: "http://127.0.0.1:6379" }\n',
    problems: [`${SRC}: state.url: must be a redis:// or rediss:// URL`],
  },
  {
    name: 'unknown state store',
    yaml: OK + 'state: { store: mongo }\n',
    problems: [`${SRC}: state.store: unknown store "mongo" (known: memory, redis)`],
  },
  {
    name: 'bad log level and cache flag',
    yaml: OK + 'cache: { enabled: yes }\nlogging: { level: verbose }\n',
    problems: [
      `${SRC}: cache.enabled: must be true or false, not text`,
      `${SRC}: logging.level: "verbose" is not one of debug, info, warn, error, silent`,
    ],
  },
  {
    name: 'invalid PORT env',
    yaml: OK,
    env: { PORT: 'abc' },
    problems: ['PORT: "abc" is not a port number (0-65535)'],
  },
  {
    name: 'PORT env out of range or not plain digits',
    yaml: OK,
    env: { PORT: '0x50' },
    problems: ['PORT: "0x50" is not a port number (0-65535)'],
  },
  {
    name: 'invalid LOG_LEVEL env',
    yaml: OK,
    env: { LOG_LEVEL: 'verbose' },
    problems: ['LOG_LEVEL: "verbose" is not one of debug, info, warn, error, silent'],
  },
  {
    name: 'several problems of every kind in one file, reported at once in file order',
    yaml: [
      'server: { port: abc, hots: 0.0.0.0 }',
      'backends:',
      '  openai: { type: openai, base_url: nope, api_key: "${K}" }',
      '  claude: { type: anthropic }',
      'models:',
      '  chat: { policy: cost, targets: [ { backend: opena1, model: gpt-4o-mini } ] }',
      '  empty: { targets: [] }',
      'keys:',
      '  - { name: t, key: short }',
      '',
    ].join('\n'),
    env: { PORT: '99999', LOG_LEVEL: 'loud' },
    problems: [
      `${SRC}: server.port: must be a number, not text`,
      `${SRC}: server.hots: unknown field (did you mean "host"?)`,
      `${SRC}: backends.openai.base_url: must be an http(s) URL`,
      `${SRC}: backends.openai.api_key: environment variable K is not set (set it, or write \${K:-default} to make it optional)`,
      `${SRC}: backends.claude.api_key: is required`,
      `${SRC}: models.chat.targets[0].backend: unknown backend "opena1" (known: openai, claude)`,
      `${SRC}: models.empty.targets: needs at least one target`,
      `${SRC}: keys[0].key: must be at least 8 characters`,
      'PORT: "99999" is not a port number (0-65535)',
      'LOG_LEVEL: "loud" is not one of debug, info, warn, error, silent',
    ],
  },
];

describe('parseConfig rejects broken configs with exact problem lines', () => {
  for (const c of broken) {
    it(c.name, () => {
      assert.deepEqual(problemsOf(c.yaml, c.env), c.problems);
    });
  }
});

describe('secrets never appear in problem lines', () => {
  const secrets = {
    apiKey: 'sk-proj-LITERALsecret000111',
    envKey: 'sk-ENVsecret-222333',
    teamKey: 'team-key-SECRET-444555',
    shortKey: 'Zq9!',
    header: 'Bearer hdr-SECRET-666777',
    listKey: 'sk-LISTsecret-888999',
    defaultKey: 'sk-DEFAULTsecret-121212',
    unclosed: 'sk-UNCLOSEDsecret-343434',
  };
  const yaml = [
    'server: { port: "4000x" }',
    'backends:',
    `  a: { type: openai, base_url: "not a url", api_key: "${secrets.apiKey}", headers: { Authorization: "${secrets.header}" }, bogus: 1 }`,
    '  b: { type: openai, base_url: "https://x.example/v1", api_key: "${ENV_KEY}", timeout_ms: -1 }',
    `  c: { type: openai, base_url: "https://x.example/v1", api_key: [ "${secrets.listKey}" ] }`,
    `  d: { type: openai, base_url: "https://x.example/v1", api_key: "\${D_KEY:${secrets.defaultKey}}" }`,
    `  e: { type: openai, base_url: "https://x.example/v1", api_key: "\${${secrets.unclosed}" }`,
    'models:',
    '  m: { policy: nope, targets: [ { backend: missing, model: x } ] }',
    'keys:',
    `  - { name: one, key: "${secrets.teamKey}" }`,
    `  - { name: two, key: "${secrets.teamKey}" }`,
    `  - { name: three, key: "${secrets.shortKey}" }`,
    `  - { name: "bad name", key: { value: "${secrets.teamKey}" } }`,
    '',
  ].join('\n');

  it('reports the problems around them without echoing any', () => {
    const problems = problemsOf(yaml, { ENV_KEY: secrets.envKey });
    assert.ok(problems.length >= 10, problems.join('\n'));
    for (const line of problems) {
      for (const [what, secret] of Object.entries(secrets)) {
        assert.ok(!line.includes(secret), `problem line leaks ${what}: ${line}`);
      }
    }
    // The lines still say where the trouble is.
    assert.ok(problems.includes(`${SRC}: keys[1].key: the same key value is used by an earlier entry`));
    assert.ok(problems.includes(`${SRC}: keys[2].key: must be at least 8 characters`));
    assert.ok(problems.includes(`${SRC}: keys[3].key: must be text, not a mapping`));
    assert.ok(problems.includes(`${SRC}: backends.c.api_key: must be text, not a list`));
  });
});

describe('parseConfig accepts and normalises', () => {
  const openaiWith = (field: string): string =>
    `backends:\n  a: { type: openai, base_url: "https://x.example/v1", ${field} }\nmodels:\n  m: { targets: [ { backend: a, model: x } ] }\n`;
  const backendA = (yaml: string, env: Env = {}) => {
    const b = parseConfig(yaml, SRC, env).config.backends.a;
    assert.ok(b !== undefined && b.type === 'openai');
    return b;
  };

  it('fills defaults', () => {
    const { config, warnings, unconfiguredBackends } = parseConfig(OK, SRC, {});
    assert.equal(config.server.host, '127.0.0.1');
    assert.equal(config.server.port, 4000);
    assert.equal(config.state.store, 'memory');
    assert.equal(config.logging.level, 'info');
    assert.equal(config.models.m?.policy, 'fallback');
    assert.deepEqual(warnings, []);
    assert.deepEqual([...unconfiguredBackends], []);
  });

  it('${VAR:-default} uses the default when VAR is unset, and VAR when set', () => {
    const yaml = openaiWith('api_key: "${KEY:-fallback-key}", organization: "org-${ORG:-none}"');
    const unset = backendA(yaml);
    assert.equal(unset.api_key, 'fallback-key');
    assert.equal(unset.organization, 'org-none');
    const set = backendA(yaml, { KEY: 'from-env', ORG: 'acme' });
    assert.equal(set.api_key, 'from-env');
    assert.equal(set.organization, 'org-acme');
  });

  it('$${ writes a literal ${', () => {
    const b = backendA(openaiWith('headers: { X-Template: "$${LITERAL}", X-Mixed: "a$${B}-${C:-c}" }'));
    assert.deepEqual(b.headers, { 'X-Template': '${LITERAL}', 'X-Mixed': 'a${B}-c' });
  });

  it('coerces a number from env where a number is expected', () => {
    const { config } = parseConfig('server: { port: "${P}", host: "${H:-127.0.0.1}" }\n' + OK, SRC, { P: '5001' });
    assert.equal(config.server.port, 5001);
    const withDefault = parseConfig('server: { port: "${P:-4100}" }\n' + OK, SRC, {});
    assert.equal(withDefault.config.server.port, 4100);
    const bool = parseConfig(OK + 'cache: { enabled: "${CACHE:-true}" }\n', SRC, {});
    assert.equal(bool.config.cache.enabled, true);
  });

  it('keeps a secret that looks like a number a string, digit for digit', () => {
    const yaml = openaiWith('api_key: "${K}"');
    assert.equal(backendA(yaml, { K: '12345' }).api_key, '12345');
    assert.equal(backendA(yaml, { K: '0012345678' }).api_key, '0012345678');
    assert.equal(backendA(yaml, { K: '12345678901234567890123' }).api_key, '12345678901234567890123');
    assert.equal(backendA(yaml, { K: '1.50' }).api_key, '1.50');
    assert.equal(backendA(yaml, { K: 'true' }).api_key, 'true');
  });

  it('PORT, HOST and LOG_LEVEL override the file', () => {
    const yaml = 'server: { host: 127.0.0.1, port: 4000 }\n' + OK;
    const { config, warnings } = parseConfig(yaml, SRC, { PORT: '5050', HOST: '0.0.0.0', LOG_LEVEL: 'debug' });
    assert.equal(config.server.port, 5050);
    assert.equal(config.server.host, '0.0.0.0');
    assert.equal(config.logging.level, 'debug');
    assert.deepEqual(warnings, ['no "keys" configured and the gateway listens on 0.0.0.0: anyone who can reach it can use it']);
    const empty = parseConfig(yaml, SRC, { PORT: '', HOST: '' });
    assert.equal(empty.config.server.port, 4000);
    assert.equal(empty.config.server.host, '127.0.0.1');
  });

  it('an openai backend whose ${VAR:-} key is unset is unconfigured, with a warning naming its models', () => {
    const yaml = [
      'backends:',
      '  openai: { type: openai, base_url: "https://api.openai.com/v1", api_key: "${OPENAI_API_KEY:-}" }',
      '  spare: { type: openai, base_url: "https://api.example.com/v1", api_key: "${SPARE_KEY:-}" }',
      '  local: { type: fake }',
      'models:',
      '  chat: { targets: [ { backend: openai, model: gpt-4o-mini }, { backend: local, model: x } ] }',
      '  mini: { targets: [ { backend: openai, model: gpt-4o-mini } ] }',
      '  other: { targets: [ { backend: local, model: x } ] }',
      '',
    ].join('\n');
    const { config, warnings, unconfiguredBackends } = parseConfig(yaml, SRC, {});
    assert.deepEqual([...unconfiguredBackends].sort(), ['openai', 'spare']);
    assert.deepEqual(warnings, [
      'backend "openai" has no api_key (its variable is unset); models "chat", "mini" skip it and answer an error if nothing else serves them',
      'backend "spare" has no api_key (its variable is unset); no model uses it',
    ]);
    assert.equal(config.backends.openai?.type, 'openai');

    const set = parseConfig(yaml, SRC, { OPENAI_API_KEY: 'sk-test', SPARE_KEY: 'sk-spare' });
    assert.deepEqual([...set.unconfiguredBackends], []);
    assert.deepEqual(set.warnings, []);
  });

  it('a literally empty api_key also marks the backend unconfigured', () => {
    const { unconfiguredBackends, warnings } = parseConfig(openaiWith('api_key: ""'), SRC, {});
    assert.deepEqual([...unconfiguredBackends], ['a']);
    assert.deepEqual(warnings, [
      'backend "a" has no api_key (it is empty); models "m" skip it and answer an error if nothing else serves them',
    ]);
  });

  it('an openai backend without api_key is fine (servers that need no key)', () => {
    const { unconfiguredBackends } = parseConfig(openaiWith('max_connections: 8'), SRC, {});
    assert.deepEqual([...unconfiguredBackends], []);
  });
});

describe('configPathFrom', () => {
  it('--config FILE beats --config=FILE order, SWITCHYARD_CONFIG and the default', () => {
    assert.equal(configPathFrom(['--config', 'a.yaml'], { SWITCHYARD_CONFIG: 'env.yaml' }), 'a.yaml');
    assert.equal(configPathFrom(['--config=b.yaml'], { SWITCHYARD_CONFIG: 'env.yaml' }), 'b.yaml');
    assert.equal(configPathFrom(['-c', 'c.yaml'], {}), 'c.yaml');
    assert.equal(configPathFrom(['--port', '1', '--config', 'd.yaml'], {}), 'd.yaml');
    assert.equal(configPathFrom([], { SWITCHYARD_CONFIG: 'env.yaml' }), 'env.yaml');
    assert.equal(configPathFrom([], { SWITCHYARD_CONFIG: '' }), 'providers.yaml');
    assert.equal(configPathFrom([], {}), 'providers.yaml');
  });

  it('--config without a file name is an error', () => {
    for (const argv of [['--config'], ['--config', ''], ['--config=']]) {
      assert.throws(() => configPathFrom(argv, {}), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(err.problems, ['--config needs a file name']);
        return true;
      });
    }
  });
});

describe('loadConfigFile', () => {
  it('reads a file and names it in problems', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-config-'));
    try {
      const good = join(dir, 'good.yaml');
      writeFileSync(good, OK);
      const loaded = loadConfigFile(good, {});
      assert.equal(loaded.source, good);
      assert.deepEqual(Object.keys(loaded.config.models), ['m']);

      const bad = join(dir, 'bad.yaml');
      writeFileSync(bad, OK + 'extra: 1\n');
      assert.throws(() => loadConfigFile(bad, {}), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.problems.length, 1);
        assert.match(err.problems[0] ?? '', new RegExp(`^${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: extra: unknown field \\(known: server, backends, models, .*\\)$`));
        return true;
      });

      const missing = join(dir, 'nope.yaml');
      assert.throws(() => loadConfigFile(missing, {}), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(err.problems, [`${missing}: file not found`]);
        return true;
      });
      assert.throws(() => loadConfigFile(dir, {}), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.deepEqual(err.problems, [`${dir}: is a directory`]);
        return true;
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
