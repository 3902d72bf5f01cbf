/**
 * An ONNX embedding model: opening the ONNX Runtime session, checking that the model's inputs and
 * outputs are ones this backend can feed and read (one clear error naming what the model has and
 * what was expected), padding a batch, one `session.run`, pooling and L2 normalisation.
 *
 * Everything except `EmbeddingModel.open` / `run` is a pure function over plain arrays, tested
 * without a model. `onnxruntime-node` is imported on first use, so a gateway without an `onnx`
 * backend never loads the native library.
 */
import type { InferenceSession, Tensor } from 'onnxruntime-node';

export type Pooling = 'mean' | 'cls';

/** One input or output as the model declares it. */
export interface ValueInfo {
  name: string;
  /** tensor element type (`int64`, `float32`, …), or `non-tensor` */
  type: string;
  /** numbers for fixed sizes, names for symbolic ones (`batch`, `sequence`); empty when unknown */
  shape: ReadonlyArray<number | string>;
}

type IdType = 'int64' | 'int32';

/** How to feed and read a model, decided once at load. */
export interface ModelPlan {
  ids: { name: string; type: IdType };
  mask: { name: string; type: IdType };
  /** present when the model has a `token_type_ids` input */
  types?: { name: string; type: IdType };
  /** `pooled`: [batch, dim], used as is; `token`: [batch, sequence, dim], pooled here */
  output: { name: string; level: 'pooled' | 'token'; dim: number | undefined };
}

export const REQUIRED_INPUTS = ['input_ids', 'attention_mask'] as const;
export const OPTIONAL_INPUTS = ['token_type_ids'] as const;
/** Outputs recognised by name, in order of preference. */
export const POOLED_OUTPUTS = ['sentence_embedding', 'sentence_embeddings', 'embeddings', 'text_embeds'] as const;
export const TOKEN_OUTPUTS = ['last_hidden_state', 'token_embeddings'] as const;

/** The model's inputs or outputs do not fit this backend. */
export class ModelMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ModelMismatchError';
  }
}

export function describeValue(v: ValueInfo): string {
  const shape = v.shape.length > 0 ? ` [${v.shape.join(', ')}]` : '';
  return `${v.name} (${v.type}${shape})`;
}

const list = (vs: readonly ValueInfo[]): string => (vs.length > 0 ? vs.map(describeValue).join(', ') : 'none');

/**
 * Decides how to feed and read the model, or throws one ModelMismatchError listing every problem,
 * with the model's inputs and outputs and what was expected.
 */
export function planModel(inputs: readonly ValueInfo[], outputs: readonly ValueInfo[], opts: { outputName?: string | undefined } = {}): ModelPlan {
  const problems: string[] = [];
  const byName = new Map(inputs.map((v) => [v.name, v]));
  const idInput = (name: string): { name: string; type: IdType } | undefined => {
    const v = byName.get(name);
    if (!v) return undefined;
    if (v.type !== 'int64' && v.type !== 'int32') {
      problems.push(`input "${name}" is ${v.type}, expected int64 or int32`);
      return undefined;
    }
    if (v.shape.length !== 0 && v.shape.length !== 2) problems.push(`input "${name}" has ${v.shape.length} dimensions, expected 2 [batch, sequence]`);
    return { name, type: v.type };
  };
  const missing = REQUIRED_INPUTS.filter((n) => !byName.has(n));
  if (missing.length > 0) problems.push(`missing input${missing.length > 1 ? 's' : ''} ${missing.map((n) => `"${n}"`).join(', ')}`);
  const extra = inputs.filter((v) => !(REQUIRED_INPUTS as readonly string[]).includes(v.name) && !(OPTIONAL_INPUTS as readonly string[]).includes(v.name));
  if (extra.length > 0) problems.push(`unexpected input${extra.length > 1 ? 's' : ''} ${extra.map((v) => `"${v.name}"`).join(', ')}`);
  const ids = idInput('input_ids');
  const mask = idInput('attention_mask');
  const types = idInput('token_type_ids');

  const output = pickOutput(outputs, opts.outputName, problems);

  if (problems.length > 0 || !ids || !mask || !output) {
    throw new ModelMismatchError(
      `the model does not fit the onnx backend: ${problems.join('; ')}. ` +
        `It has inputs ${list(inputs)} and outputs ${list(outputs)}; ` +
        `expected inputs input_ids and attention_mask (int64 or int32, [batch, sequence]), optionally token_type_ids, ` +
        `and a float output: pooled [batch, dim] (${POOLED_OUTPUTS.join(', ')}) or token-level [batch, sequence, dim] (${TOKEN_OUTPUTS.join(', ')})` +
        `${opts.outputName === undefined ? ', or name one with output_name' : ''}`,
    );
  }
  return types ? { ids, mask, types, output } : { ids, mask, output };
}

function pickOutput(outputs: readonly ValueInfo[], wanted: string | undefined, problems: string[]): ModelPlan['output'] | undefined {
  let chosen: ValueInfo | undefined;
  if (wanted !== undefined) {
    chosen = outputs.find((o) => o.name === wanted);
    if (!chosen) {
      problems.push(`output_name "${wanted}" is not an output of the model`);
      return undefined;
    }
  } else {
    chosen =
      POOLED_OUTPUTS.map((n) => outputs.find((o) => o.name === n)).find((o) => o !== undefined) ??
      TOKEN_OUTPUTS.map((n) => outputs.find((o) => o.name === n)).find((o) => o !== undefined) ??
      (outputs.length === 1 ? outputs[0] : undefined);
    if (!chosen) {
      problems.push(`no output named ${[...POOLED_OUTPUTS, ...TOKEN_OUTPUTS].map((n) => `"${n}"`).join(', ')}, and more than one output to choose from`);
      return undefined;
    }
  }
  if (chosen.type !== 'float32' && chosen.type !== 'float64') {
    problems.push(`output "${chosen.name}" is ${chosen.type}, expected float32 or float64`);
    return undefined;
  }
  const rank = chosen.shape.length;
  const last = chosen.shape[rank - 1];
  const dim = typeof last === 'number' && last > 0 ? last : undefined;
  if (rank === 2) return { name: chosen.name, level: 'pooled', dim };
  if (rank === 3) return { name: chosen.name, level: 'token', dim };
  if (rank === 0) {
    // Shape not declared: go by the name; the warm-up run at load confirms it.
    const token = (TOKEN_OUTPUTS as readonly string[]).includes(chosen.name);
    return { name: chosen.name, level: token ? 'token' : 'pooled', dim: undefined };
  }
  problems.push(`output "${chosen.name}" has ${rank} dimensions, expected 2 [batch, dim] or 3 [batch, sequence, dim]`);
  return undefined;
}

/** One tokenized input, ready to batch. */
export interface Sequence {
  ids: readonly number[];
  /** segment ids; zeros when absent */
  typeIds?: readonly number[] | undefined;
}

export interface PaddedBatch {
  batch: number;
  /** the longest sequence of the batch (not max_length) */
  seqLen: number;
  ids: Int32Array;
  mask: Int32Array;
  types: Int32Array;
}

/** Right-pads every sequence to the batch's longest, with `padId` and mask 0. */
export function padBatch(seqs: readonly Sequence[], padId: number): PaddedBatch {
  const batch = seqs.length;
  const seqLen = Math.max(1, ...seqs.map((s) => s.ids.length));
  const ids = new Int32Array(batch * seqLen).fill(padId);
  const mask = new Int32Array(batch * seqLen);
  const types = new Int32Array(batch * seqLen);
  seqs.forEach((s, b) => {
    const off = b * seqLen;
    for (let t = 0; t < s.ids.length; t++) {
      ids[off + t] = s.ids[t] ?? padId;
      mask[off + t] = 1;
      types[off + t] = s.typeIds?.[t] ?? 0;
    }
  });
  return { batch, seqLen, ids, mask, types };
}

/**
 * Token-level output [batch, seqLen, dim] → one vector per row: `mean` over the positions whose mask
 * is 1 (sentence-transformers' mean pooling), or `cls`, the first position.
 */
export function poolTokens(data: ArrayLike<number>, batch: number, seqLen: number, dim: number, mask: ArrayLike<number>, pooling: Pooling): Float32Array[] {
  const out: Float32Array[] = [];
  for (let b = 0; b < batch; b++) {
    const v = new Float64Array(dim);
    if (pooling === 'cls') {
      const off = b * seqLen * dim;
      for (let d = 0; d < dim; d++) v[d] = data[off + d] as number;
    } else {
      let count = 0;
      for (let t = 0; t < seqLen; t++) {
        const m = mask[b * seqLen + t] as number;
        if (m === 0) continue;
        count += m;
        const off = (b * seqLen + t) * dim;
        for (let d = 0; d < dim; d++) v[d] = (v[d] as number) + m * (data[off + d] as number);
      }
      const denom = Math.max(count, 1e-9);
      for (let d = 0; d < dim; d++) v[d] = (v[d] as number) / denom;
    }
    out.push(Float32Array.from(v));
  }
  return out;
}

/** Pooled output [batch, dim] → one vector per row. */
export function splitRows(data: ArrayLike<number>, batch: number, dim: number): Float32Array[] {
  const out: Float32Array[] = [];
  for (let b = 0; b < batch; b++) {
    const v = new Float32Array(dim);
    for (let d = 0; d < dim; d++) v[d] = data[b * dim + d] as number;
    out.push(v);
  }
  return out;
}

/** v / max(‖v‖₂, 1e-12), in place (as torch.nn.functional.normalize). */
export function l2Normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += (v[i] as number) * (v[i] as number);
  const norm = Math.max(Math.sqrt(sum), 1e-12);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / norm;
  return v;
}

export interface SessionSettings {
  executionProviders: readonly string[];
  intraOpThreads?: number | undefined;
  interOpThreads?: number | undefined;
}

type Ort = typeof import('onnxruntime-node');
let ortModule: Promise<Ort> | undefined;
/** onnxruntime-node, loaded on first use. */
export function loadOrt(): Promise<Ort> {
  ortModule ??= import('onnxruntime-node');
  return ortModule;
}

export function valueInfos(meta: readonly InferenceSession.ValueMetadata[]): ValueInfo[] {
  return meta.map((m) => (m.isTensor ? { name: m.name, type: m.type, shape: m.shape } : { name: m.name, type: 'non-tensor', shape: [] }));
}

/**
 * Opens an ONNX Runtime session. An execution provider that cannot start (CUDA libraries or GPU
 * missing, a provider this build does not have) is reported by name with what is available.
 */
export async function openSession(path: string, s: SessionSettings): Promise<InferenceSession> {
  const ort = await loadOrt();
  const options: InferenceSession.SessionOptions = {
    executionProviders: [...s.executionProviders],
    graphOptimizationLevel: 'all',
    logSeverityLevel: 3,
    // ONNX Runtime's threads busy-wait between runs by default, taking the cores the event loop
    // needs to parse requests and form the next batch: about 3x less throughput on 2 cores.
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
    ...(s.intraOpThreads ? { intraOpNumThreads: s.intraOpThreads } : {}),
    ...(s.interOpThreads ? { interOpNumThreads: s.interOpThreads } : {}),
  };
  try {
    return await ort.InferenceSession.create(path, options);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    const nonCpu = s.executionProviders.filter((p) => p !== 'cpu');
    if (nonCpu.length > 0 && /execution ?provider|backend not found|shared library|no available backend/i.test(msg)) {
      const backends = ort.listSupportedBackends();
      const here = backends.filter((b) => b.bundled).map((b) => b.name);
      const installable = backends.filter((b) => !b.bundled).map((b) => b.name);
      throw new Error(
        `execution provider ${nonCpu.map((p) => `"${p}"`).join(', ')} is not available (${msg.trim()}). ` +
          `Available in this onnxruntime-node build: ${here.join(', ')}` +
          (installable.length > 0 ? `; ${installable.join(', ')} also need onnxruntime-node's GPU libraries (its install step, skipped with ONNXRUNTIME_NODE_INSTALL=skip) and a GPU` : '') +
          `. Use execution_providers: [cpu] on this machine.`,
      );
    }
    throw err;
  }
}

/** A loaded, checked model: one `run` per batch of sequences. */
export class EmbeddingModel {
  /** Output size; known after the warm-up run at the latest. */
  dim: number | undefined;

  private constructor(
    private readonly ort: Ort,
    readonly session: InferenceSession,
    readonly plan: ModelPlan,
    private readonly pooling: Pooling,
    private readonly normalize: boolean,
    private readonly padId: number,
  ) {
    this.dim = plan.output.dim;
  }

  static async open(path: string, settings: SessionSettings & { pooling: Pooling; normalize: boolean; padId: number; outputName?: string | undefined }): Promise<EmbeddingModel> {
    const ort = await loadOrt();
    const session = await openSession(path, settings);
    let plan: ModelPlan;
    try {
      plan = planModel(valueInfos(session.inputMetadata), valueInfos(session.outputMetadata), { outputName: settings.outputName });
    } catch (err) {
      await session.release().catch(() => {});
      throw err;
    }
    return new EmbeddingModel(ort, session, plan, settings.pooling, settings.normalize, settings.padId);
  }

  private tensor(type: IdType, data: Int32Array, dims: number[]): Tensor {
    return type === 'int64' ? new this.ort.Tensor('int64', BigInt64Array.from(data, (x) => BigInt(x)), dims) : new this.ort.Tensor('int32', data, dims);
  }

  /** One session.run for the whole batch; one vector per sequence, in order. */
  async run(seqs: readonly Sequence[]): Promise<Float32Array[]> {
    const p = padBatch(seqs, this.padId);
    const dims = [p.batch, p.seqLen];
    const feeds: Record<string, Tensor> = {
      [this.plan.ids.name]: this.tensor(this.plan.ids.type, p.ids, dims),
      [this.plan.mask.name]: this.tensor(this.plan.mask.type, p.mask, dims),
    };
    if (this.plan.types) feeds[this.plan.types.name] = this.tensor(this.plan.types.type, p.types, dims);
    const result = await this.session.run(feeds, [this.plan.output.name]);
    const out = result[this.plan.output.name] as Tensor | undefined;
    if (!out) throw new Error(`the model returned no "${this.plan.output.name}"`);
    const data = out.data;
    if (!(data instanceof Float32Array || data instanceof Float64Array)) throw new Error(`output "${this.plan.output.name}" is ${out.type}, expected float32`);
    const level = this.plan.output.level;
    const shape = out.dims;
    const want = level === 'pooled' ? 2 : 3;
    if (shape.length !== want || shape[0] !== p.batch || (level === 'token' && shape[1] !== p.seqLen)) {
      throw new Error(
        `output "${this.plan.output.name}" came back as [${shape.join(', ')}], expected ${level === 'pooled' ? `[${p.batch}, dim]` : `[${p.batch}, ${p.seqLen}, dim]`}`,
      );
    }
    const dim = shape[want - 1] ?? 0;
    this.dim ??= dim;
    const rows = level === 'pooled' ? splitRows(data, p.batch, dim) : poolTokens(data, p.batch, p.seqLen, dim, p.mask, this.pooling);
    return this.normalize ? rows.map(l2Normalize) : rows;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
