/**
 * Tokenization for the onnx backend: a Hugging Face `tokenizer.json` (WordPiece, BPE, Unigram…)
 * run by `@huggingface/tokenizers`, plus truncation at `max_length` the way Hugging Face
 * tokenizers truncate: the text is cut, the special tokens ([CLS] … [SEP]) are kept.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';

export interface Encoded {
  ids: number[];
  typeIds: number[];
  /** tokens the full text had (before truncation) */
  fullLength: number;
  truncated: boolean;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

async function readJson(path: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`${what} ${path}: ${code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'is a directory' : 'cannot be read'}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${what} ${path}: not valid JSON`);
  }
}

/** `ids[from, from + part.length)` equals `part`. */
function matchesAt(ids: readonly number[], part: readonly number[], from: number): boolean {
  for (let i = 0; i < part.length; i++) if (ids[from + i] !== part[i]) return false;
  return true;
}

/**
 * Cuts an encoding with special tokens to `maxLength`, keeping the special tokens around the text:
 * `full` is the encoding with them, `plain` the same text without. Pure; exported for tests.
 */
export function truncateEncoding(full: { ids: number[]; typeIds: number[] }, plain: readonly number[], maxLength: number): { ids: number[]; typeIds: number[] } {
  if (full.ids.length <= maxLength) return full;
  let at = -1;
  for (let p = 0; p + plain.length <= full.ids.length; p++) {
    if (matchesAt(full.ids, plain, p)) {
      at = p;
      break;
    }
  }
  if (at < 0) return { ids: full.ids.slice(0, maxLength), typeIds: full.typeIds.slice(0, maxLength) };
  const special = full.ids.length - plain.length;
  const keep = Math.max(0, maxLength - special);
  const pick = <T>(xs: T[]): T[] => [...xs.slice(0, at + keep), ...xs.slice(at + plain.length)].slice(0, maxLength);
  return { ids: pick(full.ids), typeIds: pick(full.typeIds) };
}

export class TextTokenizer {
  private constructor(
    private readonly tok: Tokenizer,
    /** ids must be below this */
    readonly vocabSize: number,
    readonly padId: number,
  ) {}

  /** Loads `tokenizer.json`, and `tokenizer_config.json` beside it when there is one. */
  static async load(path: string): Promise<TextTokenizer> {
    const json = await readJson(path, 'tokenizer_path');
    if (!isRecord(json) || !isRecord(json.model)) throw new Error(`tokenizer_path ${path}: not a Hugging Face tokenizer.json (it has no "model")`);
    let config: unknown = {};
    const configPath = join(dirname(path), 'tokenizer_config.json');
    try {
      config = JSON.parse(await readFile(configPath, 'utf8')) as unknown;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${configPath}: ${err instanceof Error ? err.message : String(err)}`);
    }
    // The library requires these keys to exist, even when null.
    const full: Record<string, unknown> = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, added_tokens: [], ...json };
    let tok: Tokenizer;
    try {
      tok = new Tokenizer(full, isRecord(config) ? config : {});
    } catch (err) {
      throw new Error(`tokenizer_path ${path}: cannot be used (${err instanceof Error ? err.message : String(err)})`);
    }
    let maxId = -1;
    for (const id of tok.get_vocab(true).values()) maxId = Math.max(maxId, id);
    const padding = isRecord(json.padding) ? json.padding : undefined;
    const padId =
      (typeof padding?.pad_id === 'number' ? padding.pad_id : undefined) ?? tok.token_to_id('[PAD]') ?? tok.token_to_id('<pad>') ?? 0;
    return new TextTokenizer(tok, maxId + 1, padId);
  }

  /** Token ids (with the tokenizer's special tokens), cut to `maxLength`. */
  encode(text: string, maxLength: number): Encoded {
    const e = this.tok.encode(text, { return_token_type_ids: true });
    const full = { ids: e.ids, typeIds: e.token_type_ids ?? new Array<number>(e.ids.length).fill(0) };
    if (full.ids.length <= maxLength) return { ...full, fullLength: full.ids.length, truncated: false };
    const plain = this.tok.encode(text, { add_special_tokens: false }).ids;
    return { ...truncateEncoding(full, plain, maxLength), fullLength: full.ids.length, truncated: true };
  }
}
