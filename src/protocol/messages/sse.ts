/** Anthropic's SSE framing: every event is named by its own `type`. */
export function sse(event: { type: string }): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}
