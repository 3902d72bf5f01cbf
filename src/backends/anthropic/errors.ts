/**
 * What an Anthropic error answer means, for both paths to the Messages API (the SDK's translated
 * chat path and the native path): the status and the envelope
 * `{"type":"error","error":{"type":…,"message":…,"details":{"error_code":…}}}` → the GatewayError.
 */
import { GatewayError } from '../../errors/gateway-error.ts';
import { fromUpstreamStatus, redact } from '../../errors/upstream.ts';

export interface AnthropicStatusInfo {
  backend: string;
  status: number;
  /** `error.type` of the envelope */
  type: unknown;
  /** `error.message` of the envelope */
  message: unknown;
  /** `error.details.error_code` of the envelope */
  errorCode?: unknown;
  retryAfter: number | undefined;
  secrets: ReadonlyArray<string>;
}

/**
 * A non-2xx Anthropic answer → the error the client sees. As the generic table (401/403 → the
 * gateway's credentials, 429 with retry-after, 529 → overloaded, 400 → the client's fault with the
 * upstream's message redacted), plus: 402 / billing_error is the gateway's account (another target
 * may serve), and a 400 "prompt is too long" is context_length_exceeded.
 */
export function fromAnthropicStatus(info: AnthropicStatusInfo): GatewayError {
  const { backend, status, secrets } = info;
  const message = typeof info.message === 'string' && info.message !== '' ? info.message : undefined;
  const type = typeof info.type === 'string' ? info.type : undefined;
  if (status === 402 || type === 'billing_error') {
    return new GatewayError(
      'upstream_auth_failed',
      `Backend "${backend}" refused the request for billing reasons (upstream status ${status}${message ? `: ${redact(message, secrets)}` : ''}).`,
      { backend },
    );
  }
  const errorCode = typeof info.errorCode === 'string' && info.errorCode !== '' ? info.errorCode : undefined;
  const code = errorCode ?? (status === 400 && message && /prompt is too long/i.test(message) ? 'context_length_exceeded' : null);
  return fromUpstreamStatus({ backend, status, error: { message, type, code }, retryAfter: info.retryAfter, secrets });
}
