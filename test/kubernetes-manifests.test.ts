/**
 * deploy/kubernetes/: no cluster here, so the manifests are checked in three ways.
 * - Schema: each document against its kind's Kubernetes schema (kubernetes-models: types, required
 *   fields, enums, formats).
 * - Unknown fields: the OpenAPI schemas accept any extra field, but `kubectl apply` (strict field
 *   validation) rejects a misspelt one; kubernetes-models' TypeScript types are used for that check
 *   through the compiler's excess-property check on each document as an object literal.
 * - Cross-references a user trips on: ports (container, Service, providers.yaml, PORT), probe paths
 *   the gateway serves (asked over real HTTP of a gateway running the ConfigMap's config), the
 *   config path and mount, every `${VAR}` provided by the Secret or the Deployment's env, and a
 *   termination grace covering preStop + `server.shutdown_grace_ms`.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { after, describe, it } from 'node:test';
import ts from 'typescript';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { configPathFrom, parseConfig } from '../src/config/load.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const root = join(import.meta.dirname, '..');
const dir = join(root, 'deploy', 'kubernetes');

interface Doc {
  /** file#index, for messages */
  where: string;
  obj: Record<string, unknown>;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
/** Follows a path of keys; undefined when any step is missing. */
function at(v: unknown, ...path: Array<string | number>): unknown {
  let cur = v;
  for (const p of path) {
    if (typeof p === 'number') cur = Array.isArray(cur) ? cur[p] : undefined;
    else cur = isObj(cur) ? cur[p] : undefined;
  }
  return cur;
}

function parseDocs(text: string, file: string): Doc[] {
  const out: Doc[] = [];
  parseAllDocuments(text).forEach((d, i) => {
    if (d.errors.length > 0) throw new Error(`${file}#${i}: ${d.errors[0]?.message}`);
    const js: unknown = d.toJS();
    if (js === null || js === undefined) return;
    out.push({ where: `${file}#${i}`, obj: obj(js) });
  });
  return out;
}

const manifestFiles = readdirSync(dir)
  .filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml')
  .sort();
const docs: Doc[] = manifestFiles.flatMap((f) => parseDocs(readFileSync(join(dir, f), 'utf8'), f));

// --- schema -----------------------------------------------------------------------------------

type Validatable = { validate(): void };
const MODELS: Record<string, (data: never) => Validatable> = {
  'v1/ConfigMap': (d) => new ConfigMap(d),
  'v1/Secret': (d) => new Secret(d),
  'v1/Service': (d) => new Service(d),
  'apps/v1/Deployment': (d) => new Deployment(d),
  'autoscaling/v2/HorizontalPodAutoscaler': (d) => new HorizontalPodAutoscaler(d),
  'policy/v1/PodDisruptionBudget': (d) => new PodDisruptionBudget(d),
};
/** The TypeScript type of each kind, imported from kubernetes-models' group entry points. */
const TYPES: Record<string, { from: string; type: string }> = {
  'v1/ConfigMap': { from: 'kubernetes-models/v1', type: 'IConfigMap' },
  'v1/Secret': { from: 'kubernetes-models/v1', type: 'ISecret' },
  'v1/Service': { from: 'kubernetes-models/v1', type: 'IService' },
  'apps/v1/Deployment': { from: 'kubernetes-models/apps/v1', type: 'IDeployment' },
  'autoscaling/v2/HorizontalPodAutoscaler': { from: 'kubernetes-models/autoscaling/v2', type: 'IHorizontalPodAutoscaler' },
  'policy/v1/PodDisruptionBudget': { from: 'kubernetes-models/policy/v1', type: 'IPodDisruptionBudget' },
};
const kindOf = (d: Doc): string => `${String(d.obj.apiVersion)}/${String(d.obj.kind)}`;

function schemaProblems(list: readonly Doc[]): string[] {
  const problems: string[] = [];
  for (const d of list) {
    const make = MODELS[kindOf(d)];
    if (!make) {
      problems.push(`${d.where}: no schema for ${kindOf(d)} (known: ${Object.keys(MODELS).join(', ')})`);
      continue;
    }
    try {
      make(d.obj as never).validate();
    } catch (err) {
      problems.push(`${d.where} ${kindOf(d)}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return problems;
}

const parsedDeclarations = new Map<string, ts.SourceFile>();
/** Fields the kind's type does not have (and wrong types), via one in-memory TypeScript program. */
function unknownFieldProblems(list: readonly Doc[]): string[] {
  const typed = list.filter((d) => TYPES[kindOf(d)]);
  const imports = [...new Set(typed.map((d) => TYPES[kindOf(d)]!.from))].map(
    (from) => `import type { ${Object.values(TYPES).filter((t) => t.from === from).map((t) => t.type).join(', ')} } from '${from}';`,
  );
  // One document per line, so a diagnostic's line names its document.
  const first = imports.length;
  const lines = [...imports, ...typed.map((d, i) => `export const doc${i}: ${TYPES[kindOf(d)]!.type} = ${JSON.stringify(d.obj)};`)];
  const file = join(root, 'test', '__kubernetes_manifests__.ts');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (name, lang, ...rest) => {
    if (name === file) return ts.createSourceFile(name, lines.join('\n'), lang);
    // lib and kubernetes-models declarations are parsed once for every call
    let sf = parsedDeclarations.get(name);
    if (!sf) {
      sf = getSourceFile(name, lang, ...rest);
      if (sf) parsedDeclarations.set(name, sf);
    }
    return sf;
  };
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((diag) => {
    const line = diag.file && diag.start !== undefined ? diag.file.getLineAndCharacterOfPosition(diag.start).line : -1;
    const d = typed[line - first];
    const msg = ts.flattenDiagnosticMessageText(diag.messageText, '\n').split('\n').at(-1)?.trim() ?? '';
    return `${d ? `${d.where} ${kindOf(d)}` : `line ${line + 1}`}: ${msg}`;
  });
}

// --- cross-references ---------------------------------------------------------------------------

const named = (list: readonly Doc[], kind: string, name: string): Doc | undefined =>
  list.find((d) => d.obj.kind === kind && at(d.obj, 'metadata', 'name') === name);
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
/** ENV of the Dockerfile's runtime stage (KEY=value pairs, continued lines included). */
function imageEnv(text: string): Record<string, string> {
  const runtime = text.slice(text.lastIndexOf('\nFROM '));
  const out: Record<string, string> = {};
  for (const m of runtime.matchAll(/^ENV\s+((?:.*\\\n)*.*)$/gm)) {
    for (const kv of (m[1] ?? '').replace(/\\\n/g, ' ').matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S+)/g)) out[kv[1]!] = kv[2]!;
  }
  return out;
}
/** `${VAR}` names used without a default in any string value. */
function requiredVars(tree: unknown): Set<string> {
  const out = new Set<string>();
  const walk = (v: unknown): void => {
    if (typeof v === 'string') {
      for (const m of v.matchAll(/\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}/g)) if (m[1] && m[2] === undefined) out.add(m[1]);
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (isObj(v)) Object.values(v).forEach(walk);
  };
  walk(tree);
  return out;
}
const labelsMatch = (selector: unknown, labels: unknown): boolean =>
  Object.keys(obj(selector)).length > 0 && Object.entries(obj(selector)).every(([k, v]) => obj(labels)[k] === v);

interface Gateway {
  deployment: Doc;
  container: Obj;
  /** the environment the container gets: the image's ENV, then the Deployment's env (Secret refs as dummies) */
  env: Record<string, string>;
  configPath: string;
  providersYaml: string | undefined;
}

function gatewayOf(list: readonly Doc[], problems: string[]): Gateway | undefined {
  const deployment = named(list, 'Deployment', 'switchyard');
  if (!deployment) return void problems.push('no Deployment "switchyard"');
  const container = obj(at(deployment.obj, 'spec', 'template', 'spec', 'containers', 0));
  const secretName = 'switchyard-secrets';
  const secret = named(list, 'Secret', secretName);
  const secretKeys = new Set([...Object.keys(obj(at(secret?.obj, 'stringData'))), ...Object.keys(obj(at(secret?.obj, 'data')))]);
  const env: Record<string, string> = { ...imageEnv(dockerfile) };
  for (const e of arr(container.env).map(obj)) {
    const name = String(e.name);
    if (typeof e.value === 'string') env[name] = e.value;
    const ref = obj(at(e, 'valueFrom', 'secretKeyRef'));
    if (Object.keys(ref).length === 0) continue;
    if (ref.name !== secretName) problems.push(`env ${name}: secretKeyRef names Secret "${String(ref.name)}", not "${secretName}"`);
    else if (!secretKeys.has(String(ref.key))) problems.push(`env ${name}: Secret "${secretName}" has no key "${String(ref.key)}"`);
    else env[name] = `dummy-${name.toLowerCase()}-0123456789abcdef`;
  }
  const configPath = configPathFrom(arr(container.args).map(String), env);
  // The config file must come from a mounted ConfigMap key.
  let providersYaml: string | undefined;
  const volumes = arr(at(deployment.obj, 'spec', 'template', 'spec', 'volumes')).map(obj);
  for (const m of arr(container.volumeMounts).map(obj)) {
    const mountPath = String(m.mountPath);
    if (!posix.isAbsolute(configPath) || posix.dirname(configPath) !== mountPath) continue;
    const vol = volumes.find((v) => v.name === m.name);
    const cmName = at(vol, 'configMap', 'name');
    const cm = typeof cmName === 'string' ? named(list, 'ConfigMap', cmName) : undefined;
    const text = at(cm?.obj, 'data', posix.basename(configPath));
    if (typeof text === 'string') providersYaml = text;
  }
  if (providersYaml === undefined) problems.push(`the config path ${configPath} is not a key of a ConfigMap mounted at ${posix.dirname(configPath)}`);
  return { deployment, container, env, configPath, providersYaml };
}

function crossReferenceProblems(list: readonly Doc[]): string[] {
  const problems: string[] = [];
  const gw = gatewayOf(list, problems);
  if (!gw) return problems;
  const { deployment, container, env } = gw;
  const podSpec = obj(at(deployment.obj, 'spec', 'template', 'spec'));
  const podLabels = at(deployment.obj, 'spec', 'template', 'metadata', 'labels');
  const ports = arr(container.ports).map(obj);
  const containerPort = ports[0]?.containerPort;
  const portNamed = (p: unknown): unknown => (typeof p === 'string' ? ports.find((q) => q.name === p)?.containerPort : p);

  for (const probe of ['livenessProbe', 'readinessProbe'] as const) {
    const port = portNamed(at(container, probe, 'httpGet', 'port'));
    if (port !== containerPort) problems.push(`${probe} port ${String(at(container, probe, 'httpGet', 'port'))} is not the container port ${String(containerPort)}`);
  }
  const svc = named(list, 'Service', 'switchyard');
  const target = portNamed(at(svc?.obj, 'spec', 'ports', 0, 'targetPort'));
  if (target !== containerPort) problems.push(`Service targetPort ${String(at(svc?.obj, 'spec', 'ports', 0, 'targetPort'))} is not the container port ${String(containerPort)}`);
  if (!labelsMatch(at(svc?.obj, 'spec', 'selector'), podLabels)) problems.push("the Service's selector does not match the Deployment's pod labels");
  if (!labelsMatch(at(deployment.obj, 'spec', 'selector', 'matchLabels'), podLabels)) problems.push("the Deployment's selector does not match its pod labels");
  const pdb = list.find((d) => d.obj.kind === 'PodDisruptionBudget');
  if (!labelsMatch(at(pdb?.obj, 'spec', 'selector', 'matchLabels'), podLabels)) problems.push("the PodDisruptionBudget's selector does not match the Deployment's pod labels");
  const hpa = list.find((d) => d.obj.kind === 'HorizontalPodAutoscaler');
  const ref = obj(at(hpa?.obj, 'spec', 'scaleTargetRef'));
  if (ref.kind !== 'Deployment' || ref.name !== at(deployment.obj, 'metadata', 'name')) problems.push('the HPA does not scale the Deployment "switchyard"');
  if (at(container, 'resources', 'requests', 'cpu') === undefined) problems.push('the HPA scales on CPU utilization, which needs a CPU request');
  if (at(podSpec, 'securityContext', 'runAsUser') !== 1000 || at(podSpec, 'securityContext', 'runAsNonRoot') !== true) problems.push('the pod does not run as the image\'s "node" user (uid 1000, non-root)');

  if (gw.providersYaml === undefined) return problems;
  const tree: unknown = parse(gw.providersYaml);
  // Every `${VAR}` without a default comes from the Secret or the Deployment's env.
  for (const v of requiredVars(tree)) if (env[v] === undefined) problems.push(`providers.yaml uses \${${v}}, which neither the Secret nor the Deployment's env provides`);
  let loaded;
  try {
    loaded = parseConfig(gw.providersYaml, gw.configPath, env);
  } catch (err) {
    problems.push(`providers.yaml does not load: ${err instanceof Error ? err.message : String(err)}`);
    return problems;
  }
  const cfg = loaded.config;
  const cmPort = at(tree, 'server', 'port');
  if (cmPort !== containerPort) problems.push(`providers.yaml server.port ${String(cmPort)} is not the container port ${String(containerPort)}`);
  if (cfg.server.port !== containerPort) problems.push(`the gateway would listen on ${cfg.server.port} (PORT=${String(env.PORT)}), not the container port ${String(containerPort)}`);
  if (cfg.server.host !== '0.0.0.0' && cfg.server.host !== '::') problems.push(`the gateway would listen on ${cfg.server.host}, unreachable from the Service`);
  if (cfg.state.store !== 'redis') problems.push('state.store is not redis: replicas would not share limits and cache');
  else {
    const url = new URL(cfg.state.url);
    const redisSvc = named(list, 'Service', url.hostname);
    if (!redisSvc) problems.push(`state.url names host "${url.hostname}", which is no Service here`);
    else if (String(at(redisSvc.obj, 'spec', 'ports', 0, 'port')) !== (url.port || '6379')) problems.push(`state.url port ${url.port} is not the port of Service "${url.hostname}"`);
  }
  const grace = podSpec.terminationGracePeriodSeconds;
  const preStop = arr(at(container, 'lifecycle', 'preStop', 'exec', 'command')).map(String);
  const preStopSeconds = preStop[0] === 'sleep' ? Number(preStop[1]) : Number(at(container, 'lifecycle', 'preStop', 'sleep', 'seconds') ?? 0);
  const needed = preStopSeconds + cfg.server.shutdown_grace_ms / 1000;
  if (typeof grace !== 'number' || grace < needed) {
    problems.push(`terminationGracePeriodSeconds ${String(grace)} is less than preStop ${preStopSeconds} s + shutdown_grace_ms ${cfg.server.shutdown_grace_ms / 1000} s`);
  }
  return problems;
}

// --- tests ------------------------------------------------------------------------------------

describe('deploy/kubernetes manifests', () => {
  it('has every kind a replicated deployment needs, each file listed in kustomization.yaml', () => {
    const kinds = docs.map((d) => `${kindOf(d)} ${String(at(d.obj, 'metadata', 'name'))}`).sort();
    assert.deepEqual(kinds, [
      'apps/v1/Deployment switchyard',
      'apps/v1/Deployment switchyard-redis',
      'autoscaling/v2/HorizontalPodAutoscaler switchyard',
      'policy/v1/PodDisruptionBudget switchyard',
      'v1/ConfigMap switchyard-config',
      'v1/Secret switchyard-secrets',
      'v1/Service switchyard',
      'v1/Service switchyard-redis',
    ]);
    const kustomization = obj(parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')));
    assert.deepEqual(arr(kustomization.resources).map(String).sort(), manifestFiles);
  });

  it('every document is valid against its kind’s Kubernetes schema', () => {
    assert.deepEqual(schemaProblems(docs), []);
  });

  it('no document has a field its kind does not have (what kubectl’s strict validation rejects)', () => {
    assert.deepEqual(unknownFieldProblems(docs), []);
  });

  it('a manifest with a wrong field fails both checks', () => {
    const broken = parseDocs(
      `apiVersion: apps/v1
kind: Deployment
metadata: { name: broken }
spec:
  replicas: two
  selector: { matchLabels: { app: x } }
  template:
    metadata: { labels: { app: x } }
    spec:
      containers:
        - name: gateway
          image: switchyard:latest
          livenessProbe: { httpGet: { paht: /health, port: 4000 } }
---
apiVersion: v1
kind: Service
metadata: { name: broken }
spec:
  ports: [ { port: 80, targetPort: 4000, protocol: HTTP } ]
`,
      'inline.yaml',
    );
    const schema = schemaProblems(broken);
    assert.equal(schema.length, 2, schema.join('\n'));
    assert.match(schema[0]!, /^inline\.yaml#0 apps\/v1\/Deployment: .*spec\/replicas must be integer/);
    assert.match(schema[1]!, /^inline\.yaml#1 v1\/Service: .*spec\/ports\/0\/protocol must be equal to one of the allowed values/);
    const fields = unknownFieldProblems(broken);
    assert.ok(fields.some((p) => /^inline\.yaml#0 apps\/v1\/Deployment: .*'"paht"' does not exist in type 'IHTTPGetAction'/.test(p)), fields.join('\n'));
    assert.deepEqual(schemaProblems(parseDocs('apiVersion: v1\nkind: Pood\nmetadata: { name: x }\n', 'typo.yaml')), [
      `typo.yaml#0: no schema for v1/Pood (known: ${Object.keys(MODELS).join(', ')})`,
    ]);
  });

  it('ports, selectors, config mount, `${VAR}`s and the termination grace agree with each other and with the gateway', () => {
    assert.deepEqual(crossReferenceProblems(docs), []);
  });

  it('the cross-reference checks catch what a user would break', () => {
    const mutated = (edit: (list: Doc[]) => void): string[] => {
      const copy = docs.map((d) => ({ where: d.where, obj: structuredClone(d.obj) }));
      edit(copy);
      return crossReferenceProblems(copy);
    };
    const dep = (list: Doc[]): Obj => named(list, 'Deployment', 'switchyard')!.obj;
    const container = (list: Doc[]): Obj => obj(at(dep(list), 'spec', 'template', 'spec', 'containers', 0));
    const cm = (list: Doc[]): Obj => obj(named(list, 'ConfigMap', 'switchyard-config')!.obj.data);
    const editProviders = (list: Doc[], f: (t: Obj) => void): void => {
      const t = obj(parse(String(cm(list)['providers.yaml'])));
      f(t);
      cm(list)['providers.yaml'] = stringify(t);
    };

    assert.deepEqual(
      mutated((l) => void (obj(at(named(l, 'Service', 'switchyard')!.obj, 'spec', 'ports', 0)).targetPort = 8080)),
      ['Service targetPort 8080 is not the container port 4000'],
    );
    assert.deepEqual(
      mutated((l) => editProviders(l, (t) => void (obj(t.server).port = 8000))),
      ['providers.yaml server.port 8000 is not the container port 4000'],
    );
    assert.deepEqual(
      mutated((l) => void (obj(at(dep(l), 'spec', 'template', 'spec')).terminationGracePeriodSeconds = 30)),
      ['terminationGracePeriodSeconds 30 is less than preStop 5 s + shutdown_grace_ms 30 s'],
    );
    assert.deepEqual(
      mutated((l) => editProviders(l, (t) => void (obj(t.backends).groq = { type: 'openai', base_url: 'https://api.groq.com/openai/v1', api_key: '${GROQ_API_KEY}' }))),
      [
        'providers.yaml uses ${GROQ_API_KEY}, which neither the Secret nor the Deployment\'s env provides',
        'providers.yaml does not load: /etc/switchyard/providers.yaml: backends.groq.api_key: environment variable GROQ_API_KEY is not set (set it, or write ${GROQ_API_KEY:-default} to make it optional)',
      ],
    );
    const noKey = mutated((l) => void delete obj(named(l, 'Secret', 'switchyard-secrets')!.obj.stringData).TEAM_A_KEY);
    assert.equal(noKey[0], 'env TEAM_A_KEY: Secret "switchyard-secrets" has no key "TEAM_A_KEY"');
    assert.deepEqual(
      mutated((l) => void arr(container(l).env).map(obj).filter((e) => e.name === 'SWITCHYARD_CONFIG').forEach((e) => (e.value = '/app/providers.yaml'))),
      ['the config path /app/providers.yaml is not a key of a ConfigMap mounted at /app'],
    );
  });

  describe('the probes on a gateway running the ConfigMap’s providers.yaml', () => {
    const problems: string[] = [];
    const gw = gatewayOf(docs, problems);
    let running: TestGateway | undefined;
    after(async () => {
      await running?.close();
    });

    it('answer 200 on the paths the Deployment probes (liveness /health, readiness /ready)', async () => {
      assert.deepEqual(problems, []);
      assert.ok(gw?.providersYaml !== undefined);
      assert.equal(at(gw.container, 'livenessProbe', 'httpGet', 'path'), '/health');
      assert.equal(at(gw.container, 'readinessProbe', 'httpGet', 'path'), '/ready');
      // The same config with state in memory: there is no Redis here, and the probes do not depend on it.
      const tree = obj(parse(gw.providersYaml));
      tree.state = { store: 'memory' };
      tree.server = { ...obj(tree.server), host: '127.0.0.1', port: 0 };
      const env = { ...gw.env, PORT: undefined, HOST: undefined };
      running = await startGateway(stringify(tree), env);
      for (const probe of ['livenessProbe', 'readinessProbe']) {
        const path: string = String(at(gw.container, probe, 'httpGet', 'path'));
        const res = await fetch(`${running.url}${path}`);
        assert.equal(res.status, 200, `${probe} GET ${path}`);
        assert.match(res.headers.get('content-type') ?? '', /application\/json/);
        await res.body?.cancel();
      }
      const miss = await fetch(`${running.url}/healthz`);
      assert.equal(miss.status, 404, 'a mistyped probe path would fail');
      await miss.body?.cancel();
    });
  });
});
