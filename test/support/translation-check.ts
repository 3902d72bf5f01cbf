/**
 * What the translation properties require of one exchange, given the generated scenario:
 *
 * - answer side (`checkObserved`): every place a client reads the text or the reasoning has exactly
 *   the upstream's (a translated thinking block is signed by the gateway over exactly that text);
 *   the tool calls have the upstream's names, ids (Messages makes characters outside
 *   `[A-Za-z0-9_-]` `_`) and arguments (the same JSON value; the same text where both protocols
 *   carry arguments as text); usage has the upstream's counts in the client protocol's terms
 *   (input, output, total, cache reads and writes); the stop reason maps;
 * - request side (`checkUpstreamRequest`): the upstream got the client's system text, user text and
 *   earlier tool call (id, name, arguments, result) unchanged.
 */
import assert from 'node:assert/strict';
import { gatewaySignature } from '../../src/protocol/messages/signature.ts';
import type { ScriptedRequest } from './scripted-upstream.ts';
import { UPSTREAM_SIGNATURE } from './scripted-wire.ts';
import type { Backend, Ingress, Prompt, Scenario } from './translation-arbitraries.ts';
import { isRecord, type Json, type Observed, type SeenTool } from './translation-client.ts';

/** A Messages tool_use id made from any call id. */
const messagesId = (id: string): string => id.replace(/[^A-Za-z0-9_-]/g, '_');

/** Arguments text as a value; a Messages stream may leave an empty input unsent. */
function argsValue(text: string, where: string): unknown {
  if (text === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    return assert.fail(`${where}: arguments are not JSON: ${JSON.stringify(text)}`);
  }
}

/** Whether the client protocol and the backend's both carry arguments as the model's text. */
function argsTextKept(ingress: Ingress, backend: Backend, stream: boolean): boolean {
  if (ingress === 'messages') return false; // Messages carries `input` objects
  return !(backend === 'anthropic' && !stream); // Anthropic's JSON answer carries objects too
}

export function checkObserved(ingress: Ingress, backend: Backend, stream: boolean, sc: Scenario, o: Observed): void {
  const a = sc.answer;
  const text = a.text.join('');
  assert.ok(o.texts.length > 0, 'some text view');
  for (const [where, seen] of o.texts) assert.equal(seen, text, `text at ${where}`);

  const reasoning = a.reasoning.join('');
  for (const [where, seen] of o.reasonings) assert.equal(seen, reasoning, `reasoning at ${where}`);
  for (const [where, thinking, signature] of o.signatures) {
    // A translated thinking block is signed by the gateway over its text; a native one keeps Anthropic's.
    assert.equal(signature, backend === 'anthropic' ? UPSTREAM_SIGNATURE : gatewaySignature(thinking), `thinking signature at ${where}`);
  }

  const want = a.tools.map((t) => ({ id: ingress === 'messages' ? messagesId(t.id) : t.id, name: t.name, args: t.args.join('') }));
  for (const [where, calls] of o.tools) checkTools(where, calls, want, argsTextKept(ingress, backend, stream));

  const u = a.usage;
  assert.ok(o.usages.length > 0, 'some usage view');
  for (const [where, seen] of o.usages) {
    const at = `usage at ${where}`;
    if (ingress === 'messages') {
      if (seen.uncached !== undefined) assert.equal(seen.uncached, u.input - u.cached - u.written, `${at}: input_tokens`);
      if (seen.cached !== undefined) assert.equal(seen.cached, u.cached, `${at}: cache_read_input_tokens`);
      if (seen.written !== undefined) assert.equal(seen.written, u.written, `${at}: cache_creation_input_tokens`);
    } else {
      assert.equal(seen.input, u.input, `${at}: input`);
      assert.equal(seen.total, u.input + u.output, `${at}: total`);
      assert.equal(seen.cached, u.cached, `${at}: cached`);
    }
    assert.equal(seen.output, u.output, `${at}: output`);
  }
  if (ingress === 'messages' && stream && o.startInput !== undefined) {
    // A translated stream's message_start can only carry the gateway's estimate of the prompt.
    if (backend === 'anthropic') assert.equal(o.startInput, u.input - u.cached - u.written, 'message_start usage.input_tokens');
    else assert.ok(o.startInput > 0, `message_start usage.input_tokens is the prompt's estimate, not ${o.startInput}`);
  }

  const tools = a.tools.length > 0;
  const stop =
    ingress === 'responses'
      ? !tools && a.stop === 'length' ? 'incomplete' : 'completed'
      : ingress === 'messages'
        ? tools ? 'tool_use' : a.stop === 'length' ? 'max_tokens' : 'end_turn'
        : tools ? 'tool_calls' : a.stop;
  for (const [where, seen] of o.stops) assert.equal(seen, stop, `stop at ${where}`);
}

function checkTools(where: string, calls: SeenTool[], want: Array<{ id: string; name: string; args: string }>, exactText: boolean): void {
  assert.equal(calls.length, want.length, `tool calls at ${where}: ${JSON.stringify(calls)}`);
  want.forEach((w, i) => {
    const c = calls[i];
    assert.ok(c);
    assert.equal(c.name, w.name, `tool call ${i} name at ${where}`);
    assert.equal(c.id, w.id, `tool call ${i} id at ${where}`);
    assert.deepEqual(argsValue(c.args, where), argsValue(w.args, 'generated'), `tool call ${i} arguments at ${where}`);
    if (exactText) assert.equal(c.args, w.args, `tool call ${i} arguments text at ${where}`);
  });
}

// ---------------------------------------------------------------------------
// the request the upstream received

interface SeenPrompt {
  system: string;
  user: string;
  call: { id: string; name: string; args: unknown } | undefined;
  result: string | undefined;
}

const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isRecord) : []);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
/** A string content, or the text of its text parts or blocks. */
const textOf = (c: unknown): string => (typeof c === 'string' ? c : list(c).map((p) => str(p['text'])).join(''));

function fromChat(body: Json): SeenPrompt {
  const msgs = list(body['messages']);
  const call = list(msgs.find((m) => m['role'] === 'assistant')?.['tool_calls'])[0];
  const f = isRecord(call?.['function']) ? call['function'] : undefined;
  const tool = msgs.find((m) => m['role'] === 'tool');
  return {
    system: msgs.filter((m) => m['role'] === 'system' || m['role'] === 'developer').map((m) => textOf(m['content'])).join('\n\n'),
    user: textOf(msgs.find((m) => m['role'] === 'user')?.['content']),
    call: call && f ? { id: str(call['id']), name: str(f['name']), args: argsValue(str(f['arguments']), 'upstream tool_calls') } : undefined,
    result: tool ? textOf(tool['content']) : undefined,
  };
}

function fromMessages(body: Json): SeenPrompt {
  const msgs = list(body['messages']);
  const blocks = msgs.flatMap((m): Json[] => (typeof m['content'] === 'string' ? [{ type: 'text', text: m['content'], role: m['role'] }] : list(m['content']).map((b) => ({ ...b, role: m['role'] }))));
  const use = blocks.find((b) => b['type'] === 'tool_use');
  const result = blocks.find((b) => b['type'] === 'tool_result');
  return {
    system: textOf(body['system']),
    user: blocks.filter((b) => b['role'] === 'user' && b['type'] === 'text').map((b) => str(b['text'])).join(''),
    call: use ? { id: str(use['id']), name: str(use['name']), args: use['input'] } : undefined,
    result: result ? textOf(result['content']) : undefined,
  };
}

function fromResponses(body: Json): SeenPrompt {
  const items = list(body['input']);
  const call = items.find((i) => i['type'] === 'function_call');
  const out = items.find((i) => i['type'] === 'function_call_output');
  return {
    system: str(body['instructions']),
    user: textOf(items.find((i) => i['role'] === 'user')?.['content']),
    call: call ? { id: str(call['call_id']), name: str(call['name']), args: argsValue(str(call['arguments']), 'upstream function_call') } : undefined,
    result: out ? textOf(out['output']) : undefined,
  };
}

export function checkUpstreamRequest(ingress: Ingress, p: Prompt, req: ScriptedRequest | undefined): void {
  assert.ok(req, 'the upstream got a request');
  if (ingress === 'completions') {
    assert.equal(req.body['prompt'], p.user, 'upstream prompt');
    return;
  }
  const seen = req.protocol === 'messages' ? fromMessages(req.body) : req.protocol === 'responses' ? fromResponses(req.body) : fromChat(req.body);
  assert.equal(seen.system, p.system, 'upstream system text');
  assert.equal(seen.user, p.user, 'upstream user text');
  const h = p.history;
  if (!h) {
    assert.equal(seen.call, undefined, 'no earlier tool call upstream');
    return;
  }
  assert.deepEqual(seen.call, { id: h.id, name: h.name, args: JSON.parse(h.args) as unknown }, 'upstream earlier tool call');
  assert.equal(seen.result, h.result, 'upstream tool result');
}
