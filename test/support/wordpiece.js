/**
 * Writes a small BERT-style WordPiece `tokenizer.json` (the format Hugging Face exports beside a
 * sentence-transformers model): BertNormalizer (lowercase), BertPreTokenizer, WordPiece with
 * `##` continuations, and the `[CLS] $A [SEP]` template.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
export const SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
/** ids 0-4 are the special tokens, then these, in order. */
export const WORDS = [
    'the', 'quick', 'brown', 'fox', 'jump', '##s', '##ed', '##ing', 'over', 'lazy', 'dog',
    'hello', 'world', 'switch', '##yard', 'embed', 'vector', 'model', 'a', 'is', 'of',
    '.', ',', '!', '?', 'cat', 'sat', 'on', 'mat', 'red', 'blue', 'green', 'one', 'two', 'three',
];
export const VOCAB = [...SPECIAL, ...WORDS];
export function tokenizerJson() {
    const id = (t) => VOCAB.indexOf(t);
    return {
        version: '1.0',
        truncation: null,
        padding: null,
        added_tokens: SPECIAL.map((content) => ({
            id: id(content),
            content,
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
        })),
        normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
        pre_tokenizer: { type: 'BertPreTokenizer' },
        post_processor: {
            type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
            pair: [
                { SpecialToken: { id: '[CLS]', type_id: 0 } },
                { Sequence: { id: 'A', type_id: 0 } },
                { SpecialToken: { id: '[SEP]', type_id: 0 } },
                { Sequence: { id: 'B', type_id: 1 } },
                { SpecialToken: { id: '[SEP]', type_id: 1 } },
            ],
            special_tokens: {
                '[CLS]': { id: '[CLS]', ids: [id('[CLS]')], tokens: ['[CLS]'] },
                '[SEP]': { id: '[SEP]', ids: [id('[SEP]')], tokens: ['[SEP]'] },
            },
        },
        decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
        model: {
            type: 'WordPiece',
            unk_token: '[UNK]',
            continuing_subword_prefix: '##',
            max_input_chars_per_word: 100,
            vocab: Object.fromEntries(VOCAB.map((t, i) => [t, i])),
        },
    };
}
export function writeTokenizer(path) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, JSON.stringify(tokenizerJson(), null, 2));
}
//# sourceMappingURL=wordpiece.js.map