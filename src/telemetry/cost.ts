/**
 * Cost of one request from the target's configured `price` (USD per 1M tokens) and the usage the
 * upstream reported. Unknown stays unknown: no price or no usage gives `undefined`, never 0.
 */
export interface Price {
  input: number;
  output: number;
}

export interface TokenUsage {
  prompt_tokens?: number | null | undefined;
  completion_tokens?: number | null | undefined;
  /** of prompt_tokens, those read from the provider's prompt cache */
  prompt_tokens_details?: { cached_tokens?: number | null | undefined } | null | undefined;
}

export function costUsd(usage: TokenUsage | null | undefined, price: Price | undefined): number | undefined {
  if (!price || !usage) return undefined;
  const pin = usage.prompt_tokens ?? 0;
  const pout = usage.completion_tokens ?? 0;
  if (!Number.isFinite(pin) || !Number.isFinite(pout)) return undefined;
  return (pin * price.input + pout * price.output) / 1_000_000;
}

/** Header form: plain decimal, enough digits for fractions of a cent, no exponent. */
export function formatUsd(v: number): string {
  return v.toFixed(8).replace(/0+$/, '').replace(/\.$/, '.0');
}
