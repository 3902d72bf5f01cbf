/** Types the gateway's modules share. */

/** Token usage as the gateway accounts it (the Chat Completions names). */
export type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/** What the pipeline needs of a stream chunk: its usage and whether it has choices. */
export type Chunk = { usage?: Usage | null | undefined; choices: unknown[] };
