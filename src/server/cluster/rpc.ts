/**
 * Calls between the cluster primary and a worker over the IPC channel node:cluster opens (advanced
 * serialization: structured clone, so Infinity, undefined, Sets and Maps arrive as they were sent).
 * Each side answers the kinds it has handlers for; a call waits for its answer or its time-out, and
 * every pending call fails at once when the other side goes away.
 */

export type Handler = (payload: unknown) => unknown;

type Message =
  | { sy: 'call'; id: number; kind: string; payload: unknown }
  | { sy: 'reply'; id: number; ok: true; value: unknown }
  | { sy: 'reply'; id: number; ok: false; error: string };

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout | undefined;
}

function isMessage(m: unknown): m is Message {
  return typeof m === 'object' && m !== null && 'sy' in m && (m.sy === 'call' || m.sy === 'reply') && 'id' in m && typeof m.id === 'number';
}

export class Rpc {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(
    /** Sends one message; throws (or calls back with an error) when the channel is closed. */
    private readonly send: (m: Message, onError: (err: Error) => void) => void,
    private readonly handlers: Readonly<Record<string, Handler>>,
  ) {}

  call(kind: string, payload?: unknown, timeoutMs?: number): Promise<unknown> {
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const p: Pending = { resolve, reject, timer: undefined };
      if (timeoutMs !== undefined) {
        p.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new Error(`${kind}: no answer within ${timeoutMs} ms`));
        }, timeoutMs);
        p.timer.unref();
      }
      this.pending.set(id, p);
      const fail = (err: Error): void => this.settle(id, false, err.message);
      try {
        this.send({ sy: 'call', id, kind, payload }, fail);
      } catch (err) {
        fail(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Takes one message from the channel; false when it was not one of these calls or replies. */
  receive(m: unknown): boolean {
    if (!isMessage(m)) return false;
    if (m.sy === 'reply') {
      this.settle(m.id, m.ok, m.ok ? m.value : m.error);
      return true;
    }
    const handler = this.handlers[m.kind];
    const reply = (r: Message): void => {
      try {
        this.send(r, () => {});
      } catch {
        // the caller is gone: nobody waits for the answer
      }
    };
    if (!handler) {
      reply({ sy: 'reply', id: m.id, ok: false, error: `unknown call "${m.kind}"` });
      return true;
    }
    Promise.resolve()
      .then(() => handler(m.payload))
      .then(
        (value) => reply({ sy: 'reply', id: m.id, ok: true, value }),
        (err: unknown) => reply({ sy: 'reply', id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) }),
      );
    return true;
  }

  /** The other side is gone: every pending call fails. */
  closed(reason: string): void {
    for (const id of [...this.pending.keys()]) this.settle(id, false, reason);
  }

  private settle(id: number, ok: boolean, value: unknown): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (p.timer) clearTimeout(p.timer);
    if (ok) p.resolve(value);
    else p.reject(new Error(String(value)));
  }
}
