/**
 * Turns zod's issues about providers.yaml into the one-line messages users see: the value's kind
 * (never the value: it may be a secret), the allowed fields with a "did you mean", the paths in
 * the file's own terms.
 */
import { z } from 'zod';
import { configSchema } from './schema.ts';
import { joinPath } from './interpolate.ts';

export type Segs = ReadonlyArray<PropertyKey>;

export const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

function valueAt(root: unknown, segs: Segs): unknown {
  let v = root;
  for (const s of segs) v = isRecord(v) || Array.isArray(v) ? (v as Record<PropertyKey, unknown>)[s] : undefined;
  return v;
}

/** What the user wrote, by kind only: a value may be a secret. */
export function kindOf(v: unknown): string {
  if (v === null) return 'nothing';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return 'text';
  if (typeof v === 'number') return 'a number';
  if (typeof v === 'boolean') return 'true/false';
  return 'a mapping';
}

const EXPECTED: Record<string, string> = {
  number: 'a number',
  int: 'a whole number',
  string: 'text',
  boolean: 'true or false',
  object: 'a mapping',
  record: 'a mapping',
  array: 'a list',
};

/** The field names the schema allows at `segs` (where an object is expected), for "did you mean". */
function fieldsAt(segs: Segs, tree: unknown): string[] {
  let s: z.core.$ZodType | undefined = configSchema;
  let v = tree;
  const unwrap = (): void => {
    for (;;) {
      if (s instanceof z.ZodDefault || s instanceof z.ZodOptional) s = s.unwrap();
      else if (s instanceof z.ZodPipe) s = s.in;
      else if (s instanceof z.ZodDiscriminatedUnion) {
        const disc = s.def.discriminator;
        const want = isRecord(v) ? v[disc] : undefined;
        s = s.options.find((o) => o instanceof z.ZodObject && o.shape[disc] instanceof z.ZodLiteral && o.shape[disc].values.has(want as never));
      } else return;
    }
  };
  for (const seg of segs) {
    unwrap();
    if (s instanceof z.ZodObject) s = typeof seg === 'string' ? s.shape[seg] : undefined;
    else if (s instanceof z.ZodRecord) s = s.valueType;
    else if (s instanceof z.ZodArray) s = s.element;
    else return [];
    v = valueAt(v, [seg]);
  }
  unwrap();
  return s instanceof z.ZodObject ? Object.keys(s.shape) : [];
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

function unknownField(field: string, allowed: readonly string[]): string {
  const f = field.toLowerCase();
  const close = allowed
    .map((c) => ({ c, d: editDistance(f, c) }))
    .filter(({ c, d }) => d <= 2 || (f.length >= 3 && (c.startsWith(f) || f.startsWith(c))))
    .sort((x, y) => x.d - y.d)[0];
  if (close) return `unknown field (did you mean "${close.c}"?)`;
  return allowed.length > 0 ? `unknown field (known: ${allowed.join(', ')})` : 'unknown field';
}

/** One zod issue → the problems to report, as [path segments, message]. */
export function fromZod(issue: z.core.$ZodIssue, tree: unknown): Array<[Segs, string]> {
  const segs = issue.path;
  const value = valueAt(tree, segs);
  const plain = issue.message.replace(/^Invalid input: /, '');
  switch (issue.code) {
    case 'unrecognized_keys': {
      const allowed = fieldsAt(segs, tree);
      return issue.keys.map((k) => [[...segs, k], unknownField(k, allowed)]);
    }
    case 'invalid_type': {
      const want = EXPECTED[issue.expected] ?? issue.expected;
      if (value === undefined) return [[segs, 'is required']];
      if (value === null) return [[segs, `is empty (expected ${want})`]];
      if (issue.expected === 'int' && typeof value === 'number') return [[segs, 'must be a whole number']];
      return [[segs, `must be ${want}, not ${kindOf(value)}`]];
    }
    case 'too_small':
    case 'too_big': {
      if (!/^Too (small|big):/.test(issue.message)) return [[segs, issue.message]]; // a message written in the schema
      const n = Number(issue.code === 'too_small' ? issue.minimum : issue.maximum);
      const most = issue.code === 'too_big';
      if (issue.origin === 'string' || issue.origin === 'array') {
        if (!most && n === 1) return [[segs, 'must not be empty']];
        const unit = issue.origin === 'string' ? 'characters' : 'entries';
        return [[segs, `must have at ${most ? 'most' : 'least'} ${n} ${unit}`]];
      }
      const rel = issue.inclusive ? `at ${most ? 'most' : 'least'}` : most ? 'less than' : 'more than';
      return [[segs, `must be ${rel} ${n}`]];
    }
    case 'invalid_union': {
      const disc = 'discriminator' in issue && typeof issue.discriminator === 'string' ? issue.discriminator : undefined;
      const options = 'options' in issue && Array.isArray(issue.options) ? issue.options.join(', ') : undefined;
      if (disc === undefined || options === undefined) return [[segs, plain]];
      if (value === undefined) return [[segs, `is required (one of: ${options})`]];
      if (typeof value === 'string') return [[segs, `unknown ${disc} "${value}" (known: ${options})`]];
      return [[segs, `must be one of: ${options}`]];
    }
    case 'invalid_value': {
      const options = issue.values.map(String).join(', ');
      return [[segs, typeof value === 'string' ? `"${value}" is not one of ${options}` : `must be one of ${options}`]];
    }
    case 'invalid_key': {
      const why = issue.issues[0]?.message ?? 'is not allowed';
      return [[segs.slice(0, -1), `name "${String(segs.at(-1))}" ${why.replace(/^Invalid input: /, '')}`]];
    }
    default:
      return [[segs, plain]];
  }
}

export function pathOf(segs: Segs): string {
  let p = '';
  for (const s of segs) p = joinPath(p, typeof s === 'number' ? s : String(s));
  return p;
}

