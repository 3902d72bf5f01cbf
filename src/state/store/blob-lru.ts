/**
 * Whole values with a TTL in this process, bounded by the bytes of all of them together (UTF-8
 * bytes of value and key): when a new value does not fit, the least recently read or written go
 * first. The bound can change while it holds values (a config reload); shrinking evicts at once.
 * A Map keeps insertion order, so re-inserting on every read makes its first entry the least
 * recently used one.
 */

interface Blob {
  value: string;
  bytes: number;
  /** epoch ms */
  expires: number;
}

export class BlobLru {
  private readonly map = new Map<string, Blob>();
  private total = 0;

  constructor(
    private maxBytes: number,
    private readonly now: () => number,
  ) {}

  get bytes(): number {
    return this.total;
  }

  get size(): number {
    return this.map.size;
  }

  setLimit(maxBytes: number): void {
    this.maxBytes = maxBytes;
    this.evict();
  }

  get(key: string): string | undefined {
    const b = this.map.get(key);
    if (!b) return undefined;
    this.map.delete(key);
    if (b.expires <= this.now()) {
      this.total -= b.bytes;
      return undefined;
    }
    this.map.set(key, b);
    return b.value;
  }

  /** false when the value alone is larger than the whole bound (nothing is evicted for it then). */
  set(key: string, value: string, ttlMs: number): boolean {
    const bytes = Buffer.byteLength(value) + Buffer.byteLength(key);
    if (bytes > this.maxBytes) return false;
    this.delete(key);
    this.map.set(key, { value, bytes, expires: this.now() + ttlMs });
    this.total += bytes;
    this.evict();
    return true;
  }

  delete(key: string): boolean {
    const b = this.map.get(key);
    if (!b) return false;
    this.map.delete(key);
    this.total -= b.bytes;
    return b.expires > this.now();
  }

  clear(): void {
    this.map.clear();
    this.total = 0;
  }

  /** Drops expired values from the least recently used end, then evicts until the bound holds. */
  private evict(): void {
    const now = this.now();
    for (const [k, b] of this.map) {
      if (this.total <= this.maxBytes && b.expires > now) break;
      this.map.delete(k);
      this.total -= b.bytes;
    }
  }
}
