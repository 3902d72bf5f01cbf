/**
 * The gateway's signature for thinking blocks it translates from a chat backend's reasoning:
 * `swy1.` + base64url(SHA-256(thinking text)) (48 characters). Anthropic's Message format has a
 * non-empty `signature` on every thinking block, and clients (the SDK's accumulator, Claude Code)
 * keep it and send the block back on the next turn.
 *
 * It marks the block as the gateway's own; it proves nothing (anyone can compute it). Anthropic's
 * signatures are standard base64, which has no `.`, so the prefix never matches one of theirs: a
 * native Anthropic backend, which answers 400 to a signature it did not make (or an empty one),
 * gets those blocks left out (withoutGatewayThinking), and blocks with no signature with them.
 */
import { createHash, type Hash } from 'node:crypto';

export const GATEWAY_SIGNATURE_PREFIX = 'swy1.';

/** The gateway's signature of a thinking block's whole text. */
export function gatewaySignature(thinking: string): string {
  return GATEWAY_SIGNATURE_PREFIX + createHash('sha256').update(thinking).digest('base64url');
}

/** The signature of a thinking block whose text arrives in pieces (a stream). */
export class ThinkingSigner {
  private readonly hash: Hash = createHash('sha256');

  update(piece: string): void {
    this.hash.update(piece);
  }

  /** The signature; call once, after the last piece. */
  digest(): string {
    return GATEWAY_SIGNATURE_PREFIX + this.hash.digest('base64url');
  }
}

/** True for a signature the gateway made (by its prefix). */
export function isGatewaySignature(signature: unknown): boolean {
  return typeof signature === 'string' && signature.startsWith(GATEWAY_SIGNATURE_PREFIX);
}

/**
 * A thinking block Anthropic did not sign: the gateway's signature, or none at all (missing or
 * empty: made by a gateway before signatures, or by another tool), which Anthropic refuses too.
 */
function isGatewayThinking(block: unknown): boolean {
  if (typeof block !== 'object' || block === null) return false;
  const b = block as { type?: unknown; signature?: unknown };
  return b.type === 'thinking' && (b.signature === undefined || b.signature === null || b.signature === '' || isGatewaySignature(b.signature));
}

/**
 * A Messages body for Anthropic itself: thinking blocks with a gateway signature or none left out
 * of the history (Anthropic-signed thinking and redacted_thinking blocks kept as they are). Returns the
 * same object when there is none (nothing copied); otherwise a shallow copy with a new `messages`,
 * the changed turns copied (the body given is not modified), and how many blocks were dropped. An
 * assistant turn left with no content is left out, and the user turns around it become one.
 */
export function withoutGatewayThinking<T extends Record<string, unknown>>(body: T): { body: T; dropped: number } {
  const messages = body.messages;
  if (!Array.isArray(messages) || !messages.some(hasGatewayThinking)) return { body, dropped: 0 };
  let dropped = 0;
  const out: unknown[] = [];
  // a turn left out joins its neighbours: two user turns in a row become one, as Anthropic reads them
  let gap = false;
  for (const m of messages as unknown[]) {
    if (!hasGatewayThinking(m)) {
      const prev = out[out.length - 1];
      if (gap && prev !== undefined && roleOf(prev) === roleOf(m)) out[out.length - 1] = { ...(prev as object), content: [...blocksOf(prev), ...blocksOf(m)] };
      else out.push(m);
      gap = false;
      continue;
    }
    const content = (m as { content: unknown[] }).content;
    const kept = content.filter((b) => !isGatewayThinking(b));
    dropped += content.length - kept.length;
    gap = kept.length === 0;
    if (!gap) out.push({ ...(m as object), content: kept });
  }
  return { body: { ...body, messages: out }, dropped };
}

const roleOf = (m: unknown): unknown => (typeof m === 'object' && m !== null ? (m as { role?: unknown }).role : undefined);

/** A turn's content as blocks (a string is one text block). */
function blocksOf(m: unknown): unknown[] {
  const c = (m as { content?: unknown }).content;
  return typeof c === 'string' ? [{ type: 'text', text: c }] : Array.isArray(c) ? (c as unknown[]) : [];
}

/** How many thinking blocks in a body's history carry a gateway signature or none. */
export function gatewayThinkingCount(body: Record<string, unknown>): number {
  const messages = body.messages;
  if (!Array.isArray(messages)) return 0;
  let n = 0;
  for (const m of messages as unknown[]) {
    if (hasGatewayThinking(m)) n += ((m as { content: unknown[] }).content).filter(isGatewayThinking).length;
  }
  return n;
}

function hasGatewayThinking(m: unknown): boolean {
  if (typeof m !== 'object' || m === null) return false;
  const content = (m as { content?: unknown }).content;
  return Array.isArray(content) && content.some(isGatewayThinking);
}
