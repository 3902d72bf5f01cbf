/**
 * A scripted answer's body in each backend protocol: OpenAI Chat Completions (JSON, SSE), legacy
 * Completions, llama-server's flavour of both, Anthropic Messages and OpenAI Responses. Pure
 * functions: an answer and the request's facts in, the body's text out; the server
 * (scripted-upstream.ts) writes it in byte pieces.
 *
 * The shapes follow what each vendor sends: OpenAI's chunks with `usage: null` until the usage
 * chunk when `stream_options.include_usage` is set, then `data: [DONE]`; llama-server's key order,
 * `content: null` role chunk and `timings`; Anthropic's message_start, content_block_start /
 * _delta (`thinking_delta` and `signature_delta`, `text_delta`, `input_json_delta`) / _stop, a
 * `ping`, message_delta with usage, message_stop; the Responses API's events with a rising
 * `sequence_number` and `response.completed` (or `response.incomplete`) carrying the usage.
 */
import { argsOf, finish, joined, Sse, UPSTREAM_SIGNATURE, writeJson, type Flavour, type Json, type ScriptedAnswer } from './scripted-wire.ts';

const CREATED = 1_760_000_000;

// ---------------------------------------------------------------------------
// OpenAI Chat Completions (and llama-server's)

function chatUsage(a: ScriptedAnswer, flavour: Flavour): Json {
  const u = a.usage;
  const base = { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output };
  if (flavour === 'llama') return base;
  return { ...base, prompt_tokens_details: { cached_tokens: u.cached, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } };
}

function toolCallsJson(a: ScriptedAnswer): Json[] {
  return a.tools.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: argsOf(t) } }));
}

export function chatJson(a: ScriptedAnswer, model: string, flavour: Flavour): string {
  const text = joined(a);
  const message: Json = { role: 'assistant', content: text === '' && a.tools.length > 0 ? null : text };
  if (a.reasoning.length > 0) message['reasoning_content'] = a.reasoning.join('');
  if (a.tools.length > 0) message['tool_calls'] = toolCallsJson(a);
  const choice = { index: 0, message, logprobs: null, finish_reason: finish(a) };
  const body: Json =
    flavour === 'llama'
      ? { choices: [choice], created: CREATED, model, system_fingerprint: 'b6000-fake', object: 'chat.completion', usage: chatUsage(a, flavour), id: 'chatcmpl-llama' }
      : { id: 'chatcmpl-scripted', object: 'chat.completion', created: CREATED, model, choices: [choice], usage: chatUsage(a, flavour), service_tier: 'default', system_fingerprint: 'fp_scripted' };
  return writeJson(body, a.framing);
}

export function chatSse(a: ScriptedAnswer, model: string, flavour: Flavour, includeUsage: boolean): string {
  const sse = new Sse(a.framing);
  const usageOnFinish = includeUsage && flavour === 'openai' && a.framing.usageOnFinish;
  const head = (): Record<string, Json> =>
    flavour === 'llama'
      ? { created: CREATED, id: 'chatcmpl-llama', model, system_fingerprint: 'b6000-fake', object: 'chat.completion.chunk' }
      : { id: 'chatcmpl-scripted', object: 'chat.completion.chunk', created: CREATED, model, system_fingerprint: 'fp_scripted' };
  const chunk = (delta: Record<string, Json>, finishReason: string | null = null): void => {
    const choices: Json = [{ index: 0, delta, logprobs: null, finish_reason: finishReason }];
    const body: Record<string, Json> = flavour === 'llama' ? { choices, ...head() } : { ...head(), choices };
    if (includeUsage && flavour === 'openai') body['usage'] = finishReason !== null && usageOnFinish ? chatUsage(a, flavour) : null;
    if (a.framing.obfuscation && flavour === 'openai') body['obfuscation'] = 'Xy2';
    sse.event(undefined, body);
  };
  chunk(flavour === 'llama' ? { role: 'assistant', content: null } : { role: 'assistant', content: '', refusal: null });
  const nulls = a.framing.nullMembers && flavour === 'openai';
  for (const piece of a.reasoning) chunk(nulls ? { content: null, reasoning_content: piece } : { reasoning_content: piece });
  for (const piece of a.text) chunk(nulls ? { content: piece, reasoning_content: null } : { content: piece });
  const style = a.framing.toolChunks;
  if (style === 'whole' && a.tools.length > 0) {
    chunk({ tool_calls: a.tools.map((t, index) => ({ index, id: t.id, type: 'function', function: { name: t.name, arguments: argsOf(t) } })) });
  } else {
    a.tools.forEach((t, index) => {
      const [first = '', ...rest] = t.args;
      const args = style === 'first-fragment' ? rest : t.args;
      const nullContent: Record<string, Json> = nulls ? { content: null } : {};
      chunk({ ...nullContent, tool_calls: [{ index, id: t.id, type: 'function', function: { name: t.name, arguments: style === 'first-fragment' ? first : '' } }] });
      for (const piece of args) chunk({ ...nullContent, tool_calls: [{ index, function: { arguments: piece } }] });
    });
  }
  chunk({}, finish(a));
  if (includeUsage && !usageOnFinish) {
    const body: Record<string, Json> = { ...head(), choices: [], usage: chatUsage(a, flavour) };
    if (flavour === 'llama') body['timings'] = { prompt_n: a.usage.input, predicted_n: a.usage.output };
    sse.event(undefined, body);
  }
  sse.event(undefined, '[DONE]');
  return sse.text();
}

// ---------------------------------------------------------------------------
// legacy Completions

export function completionJson(a: ScriptedAnswer, model: string, flavour: Flavour): string {
  const body: Json = {
    id: 'cmpl-scripted',
    object: 'text_completion',
    created: CREATED,
    model,
    choices: [{ text: joined(a), index: 0, logprobs: null, finish_reason: a.stop }],
    usage: chatUsage(a, flavour),
  };
  return writeJson(body, a.framing);
}

export function completionSse(a: ScriptedAnswer, model: string, flavour: Flavour, includeUsage: boolean): string {
  const sse = new Sse(a.framing);
  const head = { id: 'cmpl-scripted', object: 'text_completion', created: CREATED, model };
  const chunk = (text: string, finishReason: string | null): void => sse.event(undefined, { ...head, choices: [{ text, index: 0, logprobs: null, finish_reason: finishReason }] });
  for (const piece of a.text) chunk(piece, null);
  chunk('', a.stop);
  if (includeUsage) sse.event(undefined, { ...head, choices: [], usage: chatUsage(a, flavour) });
  sse.event(undefined, '[DONE]');
  return sse.text();
}

// ---------------------------------------------------------------------------
// Anthropic Messages

function anthropicUsage(a: ScriptedAnswer, output: number): Record<string, Json> {
  const u = a.usage;
  return { input_tokens: u.input - u.cached - u.written, cache_creation_input_tokens: u.written, cache_read_input_tokens: u.cached, output_tokens: output };
}

function stopReason(a: ScriptedAnswer): string {
  return a.tools.length > 0 ? 'tool_use' : a.stop === 'length' ? 'max_tokens' : 'end_turn';
}

export function anthropicJson(a: ScriptedAnswer, model: string): string {
  const text = joined(a);
  const content: Json[] = a.reasoning.length > 0 ? [{ type: 'thinking', thinking: a.reasoning.join(''), signature: UPSTREAM_SIGNATURE }] : [];
  if (text !== '' || a.tools.length === 0) content.push({ type: 'text', text });
  for (const t of a.tools) content.push({ type: 'tool_use', id: t.id, name: t.name, input: JSON.parse(argsOf(t)) as Json });
  const body: Json = { id: 'msg_scripted', type: 'message', role: 'assistant', model, content, stop_reason: stopReason(a), stop_sequence: null, usage: anthropicUsage(a, a.usage.output) };
  return writeJson(body, a.framing);
}

export function anthropicSse(a: ScriptedAnswer, model: string): string {
  const sse = new Sse(a.framing);
  const message = { id: 'msg_scripted', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: anthropicUsage(a, 1) };
  sse.event('message_start', { type: 'message_start', message });
  let index = 0;
  if (a.reasoning.length > 0) {
    sse.event('content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
    for (const thinking of a.reasoning) if (thinking !== '') sse.event('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking } });
    sse.event('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: UPSTREAM_SIGNATURE } });
    sse.event('content_block_stop', { type: 'content_block_stop', index });
    index++;
  }
  if (a.text.join('') !== '' || a.tools.length === 0) {
    sse.event('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
    sse.event('ping', { type: 'ping' });
    for (const text of a.text) if (text !== '') sse.event('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text } });
    sse.event('content_block_stop', { type: 'content_block_stop', index });
    index++;
  }
  for (const t of a.tools) {
    sse.event('content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: t.id, name: t.name, input: {} } });
    sse.event('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: '' } });
    for (const partial_json of t.args) sse.event('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } });
    sse.event('content_block_stop', { type: 'content_block_stop', index });
    index++;
  }
  const usage = a.framing.fullDeltaUsage ? anthropicUsage(a, a.usage.output) : { output_tokens: a.usage.output };
  sse.event('message_delta', { type: 'message_delta', delta: { stop_reason: stopReason(a), stop_sequence: null }, usage });
  sse.event('message_stop', { type: 'message_stop' });
  return sse.text();
}

// ---------------------------------------------------------------------------
// OpenAI Responses

function responsesUsage(a: ScriptedAnswer): Json {
  const u = a.usage;
  return { input_tokens: u.input, input_tokens_details: { cached_tokens: u.cached }, output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: u.input + u.output };
}

function outputItems(a: ScriptedAnswer, status: string): Json[] {
  const items: Json[] = [];
  if (a.reasoning.length > 0) items.push({ id: 'rs_scripted0', type: 'reasoning', summary: [{ type: 'summary_text', text: a.reasoning.join('') }] });
  const text = joined(a);
  if (text !== '' || a.tools.length === 0) {
    items.push({ id: 'msg_scripted0', type: 'message', status, content: [{ type: 'output_text', annotations: [], logprobs: [], text }], role: 'assistant' });
  }
  a.tools.forEach((t, i) => items.push({ id: `fc_scripted${i}`, type: 'function_call', status: 'completed', arguments: argsOf(t), call_id: t.id, name: t.name }));
  return items;
}

function responseObject(a: ScriptedAnswer, id: string, model: string, done: boolean): Record<string, Json> {
  const incomplete = done && a.tools.length === 0 && a.stop === 'length';
  const status = !done ? 'in_progress' : incomplete ? 'incomplete' : 'completed';
  return {
    id,
    object: 'response',
    created_at: CREATED,
    status,
    background: false,
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    instructions: null,
    max_output_tokens: null,
    model,
    output: done ? outputItems(a, incomplete ? 'incomplete' : 'completed') : [],
    parallel_tool_calls: true,
    previous_response_id: null,
    store: true,
    temperature: 1,
    text: { format: { type: 'text' }, verbosity: 'medium' },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: done ? responsesUsage(a) : null,
    metadata: {},
  };
}

export function responsesJson(a: ScriptedAnswer, id: string, model: string): string {
  return writeJson(responseObject(a, id, model, true), a.framing);
}

export function responsesSse(a: ScriptedAnswer, id: string, model: string): string {
  const sse = new Sse(a.framing);
  let seq = 0;
  const ev = (type: string, body: Record<string, Json>): void => sse.event(type, { type, sequence_number: seq++, ...body });
  ev('response.created', { response: responseObject(a, id, model, false) });
  ev('response.in_progress', { response: responseObject(a, id, model, false) });
  const final = responseObject(a, id, model, true);
  const items = final['output'] as Array<Record<string, Json>>;
  items.forEach((item, output_index) => {
    const item_id = item['id'] as string;
    if (item['type'] === 'reasoning') {
      const text = a.reasoning.join('');
      const at = { item_id, output_index, summary_index: 0 };
      ev('response.output_item.added', { output_index, item: { id: item_id, type: 'reasoning', summary: [] } });
      ev('response.reasoning_summary_part.added', { ...at, part: { type: 'summary_text', text: '' } });
      for (const delta of a.reasoning) if (delta !== '') ev('response.reasoning_summary_text.delta', { ...at, delta });
      ev('response.reasoning_summary_text.done', { ...at, text });
      ev('response.reasoning_summary_part.done', { ...at, part: { type: 'summary_text', text } });
    } else if (item['type'] === 'message') {
      const text = joined(a);
      ev('response.output_item.added', { output_index, item: { id: item_id, type: 'message', status: 'in_progress', content: [], role: 'assistant' } });
      const part = { type: 'output_text', annotations: [], logprobs: [], text: '' };
      ev('response.content_part.added', { item_id, output_index, content_index: 0, part });
      for (const delta of a.text) if (delta !== '') ev('response.output_text.delta', { item_id, output_index, content_index: 0, delta, logprobs: [] });
      ev('response.output_text.done', { item_id, output_index, content_index: 0, text, logprobs: [] });
      ev('response.content_part.done', { item_id, output_index, content_index: 0, part: { ...part, text } });
    } else {
      const tool = a.tools[output_index - (items.length - a.tools.length)];
      ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } });
      for (const delta of tool?.args ?? []) ev('response.function_call_arguments.delta', { item_id, output_index, delta });
      ev('response.function_call_arguments.done', { item_id, output_index, arguments: item['arguments'] ?? '' });
    }
    ev('response.output_item.done', { output_index, item });
  });
  ev(final['status'] === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: final });
  return sse.text();
}
