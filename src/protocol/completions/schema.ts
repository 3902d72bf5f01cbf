/** Legacy text completions (`POST /v1/completions`). */
import { z } from 'zod';
import type { Completion } from 'openai/resources/completions';

export type { Completion };

const tokenArray = z.array(z.int().min(0)).min(1);

export const completionRequestSchema = z.looseObject({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenArray, z.array(tokenArray).min(1)]),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: z.int().min(0).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  n: z.int().min(1).max(128).nullish(),
  best_of: z.int().min(1).max(20).nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(16)]).nullish(),
  echo: z.boolean().nullish(),
  logprobs: z.int().min(0).max(5).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullish(),
  seed: z.int().nullish(),
  suffix: z.string().nullish(),
  user: z.string().optional(),
});

export type CompletionRequest = z.infer<typeof completionRequestSchema>;
