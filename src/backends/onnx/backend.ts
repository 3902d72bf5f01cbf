/**
 * `type: onnx` — embeddings computed in-process with ONNX Runtime from a sentence-transformers
 * style export (`model.onnx` + Hugging Face `tokenizer.json`).
 *
 * - load(): opens the tokenizer and the session, checks the model's inputs and outputs (one clear
 *   error when they do not fit) and makes one warm-up run; `/ready` waits for it, and a failure is
 *   reported at start-up while the backend answers 503 `backend_not_ready`.
 * - embed(): tokenizes each input (token-array inputs are used as ids), truncates at `max_length`,
 *   and hands the sequences to a dynamic batcher: concurrent requests share one `session.run`,
 *   padded to the longest sequence of the batch. Usage counts the tokens actually used.
 */
import { stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { OnnxBackendConfig } from '../../config/schema.ts';
import { GatewayError, invalidRequest } from '../../errors/gateway-error.ts';
import type { EmbeddingRequest, EmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities } from '../contract.ts';
import { Batcher, BatcherClosedError, type BatcherStats } from './batcher.ts';
import { EmbeddingModel, type Sequence } from './model.ts';
import { TextTokenizer } from './tokenizer.ts';

export interface OnnxStats extends BatcherStats {
  /** inputs cut at max_length */
  truncated: number;
}

interface Loaded {
  model: EmbeddingModel;
  tokenizer: TextTokenizer;
  dim: number;
}

/** The directory name above the file, e.g. `v1` for models/minilm/v1/model.onnx. */
export function modelVersion(modelPath: string): string {
  return basename(dirname(resolve(modelPath)));
}

/** A load error for a missing or unreadable file, naming the path as written and where it led. */
async function mustExist(field: string, written: string): Promise<void> {
  const abs = resolve(written);
  const where = abs === written ? written : `${written} (${abs})`;
  let isFile: boolean;
  try {
    isFile = (await stat(abs)).isFile();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`${field} ${where}: ${code === 'ENOENT' ? 'file not found' : code === 'EACCES' ? 'permission denied' : 'cannot be read'}`);
  }
  if (!isFile) throw new Error(`${field} ${where}: is not a file`);
}

export class OnnxBackend implements BaseLLM {
  readonly type = 'onnx' as const;
  readonly capabilities: Capabilities = { chat: false, embeddings: true, completions: false };
  /** absolute paths */
  readonly modelPath: string;
  readonly tokenizerPath: string;
  private readonly tokenizerPathAsWritten: string;
  private loaded: Loaded | undefined;
  private loadError: string | undefined;
  private truncatedCount = 0;
  private readonly batcher: Batcher<Sequence, Float32Array>;

  constructor(
    readonly id: string,
    private readonly cfg: OnnxBackendConfig,
    private readonly logger?: Logger,
  ) {
    this.tokenizerPathAsWritten = cfg.tokenizer_path ?? join(dirname(cfg.model_path), 'tokenizer.json');
    this.modelPath = resolve(cfg.model_path);
    this.tokenizerPath = resolve(this.tokenizerPathAsWritten);
    this.batcher = new Batcher<Sequence, Float32Array>({
      windowMs: cfg.batch.window_ms,
      maxBatchSize: cfg.batch.max_batch_size,
      run: (seqs) => {
        this.batchObserver?.(seqs.length);
        return this.runBatch(seqs);
      },
    });
  }

  private batchObserver: ((size: number) => void) | undefined;

  /** Reports the size of every batch (the gateway feeds `switchyard_onnx_batch_size`). */
  observeBatches(fn: (size: number) => void): void {
    this.batchObserver = fn;
  }

  /** Batches run and inputs served so far (tests and benchmarks read this). */
  get stats(): OnnxStats {
    return { ...this.batcher.stats, truncated: this.truncatedCount };
  }

  /** Output size, once loaded. */
  get dimensions(): number | undefined {
    return this.loaded?.dim;
  }

  async load(): Promise<void> {
    try {
      await mustExist('model_path', this.cfg.model_path);
      await mustExist('tokenizer_path', this.tokenizerPathAsWritten);
      const tokenizer = await TextTokenizer.load(this.tokenizerPathAsWritten);
      const model = await EmbeddingModel.open(this.modelPath, {
        executionProviders: this.cfg.execution_providers,
        intraOpThreads: this.cfg.intra_op_threads,
        interOpThreads: this.cfg.inter_op_threads,
        pooling: this.cfg.pooling,
        normalize: this.cfg.normalize,
        padId: tokenizer.padId,
        outputName: this.cfg.output_name,
      }).catch((err: unknown) => {
        throw new Error(`model_path ${this.cfg.model_path}: ${err instanceof Error ? err.message : String(err)}`);
      });
      try {
        // One real run: proves the model executes and learns its output size.
        const warm = tokenizer.encode('warm up', this.cfg.max_length);
        const [v] = await model.run([warm]);
        const dim = v?.length ?? 0;
        if (dim === 0) throw new Error('the model produced an empty vector');
        this.loaded = { model, tokenizer, dim };
      } catch (err) {
        await model.release().catch(() => {});
        throw new Error(`model_path ${this.cfg.model_path}: the warm-up run failed: ${err instanceof Error ? err.message : String(err)}`);
      }
    } catch (err) {
      this.loadError = err instanceof Error ? err.message : String(err);
      throw err;
    }
  }

  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResponse> {
    ctx.signal.throwIfAborted();
    const m = this.ready();
    if (req.dimensions !== undefined && req.dimensions !== m.dim) {
      throw invalidRequest(`The model '${req.model}' produces ${m.dim}-dimensional embeddings and cannot shorten them: omit "dimensions" or set it to ${m.dim}.`, 'dimensions');
    }
    const seqs = this.sequences(req.input, m);
    let tokens = 0;
    for (const s of seqs) tokens += s.ids.length;
    let vectors: Float32Array[];
    try {
      vectors = await this.batcher.submitAll(seqs, ctx.signal);
    } catch (err) {
      if (err instanceof BatcherClosedError) throw notReady(this.id, 'is shutting down');
      throw err;
    }
    const base64 = req.encoding_format === 'base64';
    return {
      object: 'list',
      data: vectors.map((v, index) => ({
        object: 'embedding' as const,
        index,
        // Float32 all the way: the float and base64 answers are the same numbers.
        embedding: base64 ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') : Array.from(v),
      })),
      model: req.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  }

  async health(): Promise<BackendHealth> {
    if (this.loaded) return { ok: true, ready: true, detail: `${modelVersion(this.modelPath)}: ${this.loaded.dim} dimensions` };
    if (this.loadError !== undefined) return { ok: false, ready: false, detail: this.loadError };
    return { ok: true, ready: false, detail: 'loading' };
  }

  async close(): Promise<void> {
    this.batcher.close();
    // A session must not be released under a running session.run.
    await this.batcher.idle();
    const m = this.loaded;
    this.loaded = undefined;
    await m?.model.release();
  }

  private ready(): Loaded {
    if (this.loaded) return this.loaded;
    throw notReady(this.id, this.loadError !== undefined ? 'failed to load its model (see the start-up log)' : 'is still loading its model');
  }

  /** Tokenized inputs, truncated at max_length; token-array inputs are ids already. */
  private sequences(input: EmbeddingRequest['input'], m: Loaded): Sequence[] {
    const max = this.cfg.max_length;
    const items: Array<string | number[]> =
      typeof input === 'string' ? [input] : input.length > 0 && typeof input[0] === 'number' ? [input as number[]] : (input as Array<string | number[]>);
    let cut = 0;
    const seqs = items.map((x, i): Sequence => {
      if (typeof x === 'string') {
        const e = m.tokenizer.encode(x, max);
        if (e.truncated) cut++;
        return { ids: e.ids, typeIds: e.typeIds };
      }
      const bad = x.find((id) => id >= m.tokenizer.vocabSize);
      if (bad !== undefined) {
        throw invalidRequest(`Token id ${bad} is outside the model's vocabulary (0-${m.tokenizer.vocabSize - 1}).`, Array.isArray(input[0]) ? `input[${i}]` : 'input');
      }
      if (x.length > max) cut++;
      return { ids: x.length > max ? x.slice(0, max) : x };
    });
    if (cut > 0) {
      // Documented behaviour; said once in the log so that an operator who did not read it learns.
      if (this.truncatedCount === 0) {
        this.logger?.warn('onnx: inputs longer than max_length are truncated (usage counts the tokens used)', { backend: this.id, max_length: max });
      }
      this.truncatedCount += cut;
    }
    return seqs;
  }

  private runBatch(seqs: Sequence[]): Promise<Float32Array[]> {
    const m = this.loaded;
    if (!m) return Promise.reject(notReady(this.id, 'is shutting down'));
    return m.model.run(seqs);
  }
}

function notReady(backend: string, why: string): GatewayError {
  return new GatewayError('backend_not_ready', `Backend "${backend}" ${why}.`, { retryAfter: 1, backend });
}
