/**
 * Counters and histograms for the metrics every request updates, with prom-client's exposition.
 * Each label combination's figures live in a plain cell, found by the label values alone; prom-client's
 * own `inc`/`observe` validate the label names, hash them and (histograms) key each bucket by its
 * bound turned into a string, on every call. Hot path: a request's metric updates are cell writes
 * only (docs/architecture.md, hot-path table). The Registry still renders them, from
 * what `get()` returns in prom-client's shape, so `/metrics` reads exactly as before
 * (src/telemetry/cells.test.ts compares the text with prom-client's own metrics fed alike).
 */
import type { Registry } from 'prom-client';

type Labels<L extends string> = Readonly<Record<L, string>>;

interface Value {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface Rendered {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: Value[];
}

interface Options<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  registers: Registry[];
}

/** One level of the label tree: the cells under each value of the next label, or the cell itself at the last. */
interface Level<C> {
  next: Map<string, Level<C>>;
  cell: C | undefined;
}

abstract class Cells<L extends string, C> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum';
  private readonly labelNames: readonly L[];
  /** found by one Map lookup per label value (no key string built per call); `list` keeps them in creation order */
  private root: Level<C> = { next: new Map(), cell: undefined };
  private list: C[] = [];

  constructor(o: Options<L>) {
    this.name = o.name;
    this.help = o.help;
    this.labelNames = o.labelNames;
    // The Registry reads a metric's name, type, help, aggregator, `get()` and `reset()` only; its
    // types list prom-client's four classes, hence the cast.
    for (const r of o.registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  protected abstract create(labels: Record<string, string>): C;

  /** The cell of these label values. */
  protected cell(labels: Labels<L>): C {
    const names = this.labelNames;
    let level = this.root;
    for (let i = 0; i < names.length; i++) {
      const v = labels[names[i] as L];
      let next = level.next.get(v);
      if (next === undefined) {
        next = { next: new Map(), cell: undefined };
        level.next.set(v, next);
      }
      level = next;
    }
    let c = level.cell;
    if (c === undefined) {
      const own: Record<string, string> = {};
      for (const n of names) own[n] = labels[n];
      c = this.create(own);
      level.cell = c;
      this.list.push(c);
    }
    return c;
  }

  protected all(): readonly C[] {
    return this.list;
  }

  reset(): void {
    this.root = { next: new Map(), cell: undefined };
    this.list = [];
  }
}

interface CounterCell {
  labels: Record<string, string>;
  value: number;
}

export class CounterCells<L extends string> extends Cells<L, CounterCell> {
  readonly type = 'counter';

  protected create(labels: Record<string, string>): CounterCell {
    return { labels, value: 0 };
  }

  /** Adds `value` (1 by default); a negative or non-finite value is ignored (a counter only rises). */
  inc(labels: Labels<L>, value = 1): void {
    if (!(value >= 0) || value === Number.POSITIVE_INFINITY) return;
    this.cell(labels).value += value;
  }

  async get(): Promise<Rendered> {
    const values: Value[] = [];
    for (const c of this.all()) values.push({ labels: c.labels, value: c.value });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

interface HistogramCell {
  labels: Record<string, string>;
  /** observations per bucket (not cumulative); above the last bound only in `count` */
  buckets: Float64Array;
  sum: number;
  count: number;
}

export class HistogramCells<L extends string> extends Cells<L, HistogramCell> {
  readonly type = 'histogram';
  private readonly bounds: readonly number[];

  constructor(o: Options<L> & { buckets: readonly number[] }) {
    super(o);
    this.bounds = [...o.buckets].sort((a, b) => a - b);
  }

  protected create(labels: Record<string, string>): HistogramCell {
    return { labels, buckets: new Float64Array(this.bounds.length), sum: 0, count: 0 };
  }

  /** Records one observation; a non-finite value is ignored. */
  observe(labels: Labels<L>, value: number): void {
    if (!Number.isFinite(value)) return;
    const c = this.cell(labels);
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > (b[i] as number)) i++;
    if (i < b.length) c.buckets[i] = (c.buckets[i] as number) + 1;
    c.sum += value;
    c.count++;
  }

  async get(): Promise<Rendered> {
    const bucket = `${this.name}_bucket`;
    const values: Value[] = [];
    for (const c of this.all()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += c.buckets[i] as number;
        values.push({ labels: { le: this.bounds[i] as number, ...c.labels }, value: acc, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', ...c.labels }, value: c.count, metricName: bucket });
      values.push({ labels: c.labels, value: c.sum, metricName: `${this.name}_sum` });
      values.push({ labels: c.labels, value: c.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
