/**
 * Which `models:` entry serves the name a client put in `model`.
 *
 * Order (the first rule that matches wins):
 * 1. an entry whose key is exactly the name (aliases are such entries, expanded at load);
 * 2. the patterns (keys with `*`, which matches any run of characters, the empty one included),
 *    most specific first: the most literal (non-`*`) characters, then the fewest `*`, then the one
 *    listed first in providers.yaml.
 * A target's `model` in a pattern entry may name what the client sent: `${0}` is the whole name,
 * `${1}`… what each `*` matched, left to right.
 *
 * Pure: built once per configuration generation; a lookup of an exact name is one Map read.
 */
import { isPattern, PLACEHOLDER, starCount } from '../config/model-names.ts';
import type { ModelConfig } from '../config/schema.ts';

export interface ModelRoute {
  /** the `models:` key that matched: the label for metrics, breakers and status */
  key: string;
  config: ModelConfig;
  /** `${0}` (the whole name) and `${1}`… (what each `*` matched) */
  captures: readonly string[];
}

interface Pattern {
  key: string;
  config: ModelConfig;
  regex: RegExp;
  literal: number;
  stars: number;
  order: number;
}

function globToRegex(key: string): RegExp {
  const parts = key.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('(.*?)')}$`, 's');
}

export class ModelRoutes {
  /** hot path: an exact name's route is built once, not per request */
  private readonly exact = new Map<string, ModelRoute>();
  private readonly patterns: Pattern[] = [];

  constructor(models: Readonly<Record<string, ModelConfig>>) {
    let order = 0;
    for (const [key, config] of Object.entries(models)) {
      if (!isPattern(key)) {
        this.exact.set(key, { key, config, captures: [key] });
        continue;
      }
      const stars = starCount(key);
      this.patterns.push({ key, config, regex: globToRegex(key), literal: key.length - stars, stars, order: order++ });
    }
    this.patterns.sort((a, b) => b.literal - a.literal || a.stars - b.stars || a.order - b.order);
  }

  /** The entry that serves `name`, or undefined (the model does not exist). */
  match(name: string): ModelRoute | undefined {
    const exact = this.exact.get(name);
    if (exact) return exact;
    for (const p of this.patterns) {
      const m = p.regex.exec(name);
      if (m) return { key: p.key, config: p.config, captures: [name, ...m.slice(1).map((s) => s ?? '')] };
    }
    return undefined;
  }

  /** The `models:` key that serves `name`, or undefined. */
  keyOf(name: string): string | undefined {
    return this.exact.has(name) ? name : this.match(name)?.key;
  }

  /** The names a client can list: every key without a `*`. */
  concrete(): string[] {
    return [...this.exact.keys()];
  }
}

/** A target's upstream model name with the route's placeholders filled in. */
export function targetModel(template: string, captures: readonly string[]): string {
  if (!template.includes('${')) return template;
  return template.replace(PLACEHOLDER, (_, n: string) => captures[Number(n)] ?? '');
}
