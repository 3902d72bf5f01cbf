/**
 * Buffers for large upstream answers, reused once the gateway is done with them.
 *
 * An embeddings answer (16 × 1536 floats: ~312 KB) is read into one buffer, checked, and written to
 * the client as it came (embeddings-passthrough.ts). Node frees a buffer's memory only when V8
 * collects the Buffer object; under load those objects outlive a young-generation collection, are
 * promoted, and their memory waits for the next full GC, which V8 starts only after ~64 MB more
 * such memory. Constraint: peak RSS under concurrent large answers stays bounded by what is in
 * flight, not by what the next full GC will free. A buffer given back here after its response was
 * handed to the OS is lent to the next large answer instead, already paged in.
 *
 * Only buffers this pool lent can be given back, each once (a WeakSet of the lent ones): a buffer
 * given twice, or one it never lent, is ignored, so no two answers can ever share one. A buffer
 * nobody gives back is left to the garbage collector. Idle buffers are bounded (MAX_IDLE_BYTES) and
 * dropped after IDLE_MS without use, so a burst does not leave memory held for good.
 */

/** Smaller answers come from Node's own small-buffer pool. */
const MIN_BYTES = 64 * 1024;
/** Larger ones are rare enough to allocate each time. */
const MAX_BYTES = 16 * 1024 * 1024;
/** The most memory kept in idle buffers. */
const MAX_IDLE_BYTES = 8 * 1024 * 1024;
/** Idle buffers of a size not asked for in this long are dropped. */
const IDLE_MS = 10_000;

/** `n` rounded up to a size class: eighths of its power of two (at most 12.5% unused). */
export function sizeClass(n: number): number {
  const step = 2 ** Math.max(0, Math.floor(Math.log2(n)) - 3);
  return Math.ceil(n / step) * step;
}

export class BodyPool {
  /** idle whole buffers by size class */
  private readonly idle = new Map<number, Buffer<ArrayBuffer>[]>();
  /** when each class was last asked for */
  private readonly used = new Map<number, number>();
  private idleBytes = 0;
  /** the memory of every buffer lent and not yet given back */
  private readonly lent = new WeakSet<ArrayBuffer>();
  private trimmer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxIdleBytes = MAX_IDLE_BYTES,
    private readonly idleMs = IDLE_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** A buffer of exactly `length` bytes, its contents undefined (as Buffer.allocUnsafe). */
  take(length: number): Buffer<ArrayBuffer> {
    if (length < MIN_BYTES || length > MAX_BYTES) return Buffer.allocUnsafe(length);
    const size = sizeClass(length);
    this.used.set(size, this.now());
    let whole = this.idle.get(size)?.pop();
    if (whole) this.idleBytes -= size;
    else whole = Buffer.allocUnsafeSlow(size);
    this.lent.add(whole.buffer);
    return whole.subarray(0, length);
  }

  /**
   * Takes back a buffer `take` lent, once nothing reads or writes it any more; anything else is
   * ignored (a buffer not lent by this pool, or given back already).
   */
  give(buf: Buffer<ArrayBuffer>): void {
    const mem = buf.buffer;
    if (!this.lent.delete(mem)) return;
    const size = mem.byteLength;
    if (this.idleBytes + size > this.maxIdleBytes) return;
    let list = this.idle.get(size);
    if (!list) this.idle.set(size, (list = []));
    list.push(Buffer.from(mem));
    this.idleBytes += size;
    this.trimmer ??= setInterval(() => this.trim(), this.idleMs).unref();
  }

  /** Drops the idle buffers of sizes not asked for in `idleMs`. */
  trim(): void {
    const old = this.now() - this.idleMs;
    for (const [size, list] of this.idle) {
      if ((this.used.get(size) ?? 0) > old) continue;
      this.idleBytes -= size * list.length;
      this.idle.delete(size);
      this.used.delete(size);
    }
    if (this.idle.size === 0 && this.trimmer) {
      clearInterval(this.trimmer);
      this.trimmer = undefined;
    }
  }

  /** Bytes held in idle buffers (for tests and metrics). */
  get idleSize(): number {
    return this.idleBytes;
  }
}

/** The process's pool for upstream answers (backends/upstream/call.ts lends, the embeddings route gives back). */
export const bodyPool = new BodyPool();
