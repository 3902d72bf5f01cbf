/**
 * The `switchyard` command line. For now one command:
 *
 *   switchyard inspect path/to/model.onnx [--json]
 *
 * prints the model's inputs and outputs (name, element type, dimensions), IR version, opsets,
 * producer and metadata_props, and whether the `onnx` backend can serve it (the same check as at
 * load). Exit status: 0 it fits, 2 it loads but does not fit, 1 it cannot be read.
 */
import { stat } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { readModelHeader, type ModelHeader } from './backends/onnx/header.ts';
import { openSession, planModel, valueInfos, type ModelPlan, type ValueInfo } from './backends/onnx/model.ts';

interface Out {
  write(s: string): unknown;
}

const USAGE = `usage: switchyard inspect MODEL.onnx [--json]

  inspect   print an ONNX model's inputs, outputs, opsets, producer and metadata,
            and whether the onnx backend can serve it
`;

interface Report {
  path: string;
  ir_version: number | null;
  opsets: Array<{ domain: string; version: number }>;
  producer: { name: string; version: string };
  domain: string;
  model_version: number | null;
  doc_string: string;
  metadata: Record<string, string>;
  inputs: ValueInfo[];
  outputs: ValueInfo[];
  onnx_backend: { fits: true; output: string; output_level: 'pooled' | 'token'; dimensions: number | null; token_type_ids: boolean } | { fits: false; error: string };
}

function report(path: string, h: ModelHeader, inputs: ValueInfo[], outputs: ValueInfo[], plan: ModelPlan | Error): Report {
  return {
    path,
    ir_version: h.irVersion ?? null,
    opsets: h.opsets,
    producer: { name: h.producerName ?? '', version: h.producerVersion ?? '' },
    domain: h.domain ?? '',
    model_version: h.modelVersion ?? null,
    doc_string: h.docString ?? '',
    metadata: Object.fromEntries(h.metadata.map((m) => [m.key, m.value])),
    inputs,
    outputs,
    onnx_backend:
      plan instanceof Error
        ? { fits: false, error: plan.message }
        : { fits: true, output: plan.output.name, output_level: plan.output.level, dimensions: plan.output.dim ?? null, token_type_ids: plan.types !== undefined },
  };
}

function table(vs: readonly ValueInfo[]): string {
  if (vs.length === 0) return '    (none)\n';
  const w = Math.max(...vs.map((v) => v.name.length));
  const tw = Math.max(...vs.map((v) => v.type.length));
  return vs.map((v) => `    ${v.name.padEnd(w)}  ${v.type.padEnd(tw)}  [${v.shape.join(', ')}]\n`).join('');
}

function text(r: Report): string {
  const opsets = r.opsets.map((o) => `${o.domain === '' ? 'ai.onnx' : o.domain} ${o.version}`).join(', ') || 'none';
  const producer = [r.producer.name, r.producer.version].filter((s) => s !== '').join(' ') || 'unknown';
  let s = `${r.path}\n`;
  s += `  ir_version: ${r.ir_version ?? 'unknown'}    opset: ${opsets}\n`;
  s += `  producer: ${producer}${r.domain ? `    domain: ${r.domain}` : ''}${r.model_version !== null ? `    model_version: ${r.model_version}` : ''}\n`;
  if (r.doc_string) s += `  doc_string: ${r.doc_string.split('\n')[0] ?? ''}\n`;
  s += `  inputs:\n${table(r.inputs)}`;
  s += `  outputs:\n${table(r.outputs)}`;
  const meta = Object.entries(r.metadata);
  s += `  metadata_props:${meta.length === 0 ? ' (none)' : ''}\n`;
  for (const [k, v] of meta) s += `    ${k}: ${v}\n`;
  const b = r.onnx_backend;
  s += b.fits
    ? `  onnx backend: fits — ${b.output_level === 'pooled' ? 'pooled' : 'token-level (pooled by the backend)'} output "${b.output}"` +
      `${b.dimensions !== null ? `, ${b.dimensions} dimensions` : ''}${b.token_type_ids ? ', token_type_ids from the tokenizer' : ''}\n`
    : `  onnx backend: ${b.error}\n`;
  return s;
}

async function inspect(args: string[], out: Out, err: Out): Promise<number> {
  const json = args.includes('--json');
  const paths = args.filter((a) => a !== '--json');
  const unknown = paths.filter((a) => a.startsWith('-'));
  if (paths.length !== 1 || unknown.length > 0) {
    err.write(unknown.length > 0 ? `switchyard inspect: unknown option ${unknown[0] ?? ''}\n${USAGE}` : USAGE);
    return 1;
  }
  const path = paths[0] as string;
  try {
    const s = await stat(path);
    if (!s.isFile()) throw Object.assign(new Error('is not a file'), { code: 'EISDIR' });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    err.write(`switchyard inspect: ${path}: ${code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'is not a file' : 'cannot be read'}\n`);
    return 1;
  }
  let header: ModelHeader;
  let inputs: ValueInfo[];
  let outputs: ValueInfo[];
  try {
    header = await readModelHeader(path);
    const session = await openSession(path, { executionProviders: ['cpu'] });
    inputs = valueInfos(session.inputMetadata);
    outputs = valueInfos(session.outputMetadata);
    await session.release();
  } catch (e) {
    err.write(`switchyard inspect: ${path}: not a loadable ONNX model: ${e instanceof Error ? e.message.trim() : String(e)}\n`);
    return 1;
  }
  let plan: ModelPlan | Error;
  try {
    plan = planModel(inputs, outputs);
  } catch (e) {
    plan = e instanceof Error ? e : new Error(String(e));
  }
  const r = report(path, header, inputs, outputs, plan);
  out.write(json ? `${JSON.stringify(r, null, 2)}\n` : text(r));
  return r.onnx_backend.fits ? 0 : 2;
}

export async function runCli(argv: readonly string[], out: Out = process.stdout, err: Out = process.stderr): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'inspect':
      return inspect(rest, out, err);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      (cmd === undefined ? err : out).write(USAGE);
      return cmd === undefined ? 1 : 0;
    default:
      err.write(`switchyard: unknown command "${cmd}"\n${USAGE}`);
      return 1;
  }
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  runCli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`switchyard: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
