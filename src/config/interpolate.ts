/**
 * `${VAR}` and `${VAR:-default}` in any string of the config. An unset `${VAR}` (no default) is an
 * error naming VAR and the path; `$${` writes a literal `${`. A value that was produced by
 * interpolation and reads as a number or boolean becomes one, so `port: ${PORT:-4000}` works; only
 * numbers that survive the round trip are converted, so a secret such as "007" or a 20-digit key is
 * never altered (string fields turn numbers back into their text). Messages name the variable, never
 * its value or a default (which may be a secret).
 *
 * `${0}`…`${9}` in a target's `model` (models.<name>.targets[i].model) are not variables: they are
 * the model route's placeholders (router/model-routes.ts), left as they are.
 */

export interface InterpolationResult {
  value: unknown;
  problems: Array<{ path: string; message: string }>;
  /** paths whose value came out empty from `${VAR:-}` */
  emptyPaths: Set<string>;
}

const REF = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{([^}]*)\}?/g;
const PLACEHOLDER = /^\$\{\d\}$/;
/** models.<name>.targets[<i>].model: where `${0}`…`${9}` are route placeholders */
const TARGET_MODEL = /^models\..+\.targets\[\d+\]\.model$/;

export function joinPath(base: string, seg: string | number): string {
  if (typeof seg === 'number') return `${base}[${seg}]`;
  return base === '' ? seg : `${base}.${seg}`;
}

/**
 * Says what is wrong with a `${…}` that is not `${NAME}` or `${NAME:-default}`. It echoes a variable
 * name only where the text is plainly one (`${NAME` unclosed, `${NAME:…}`), never a default or other
 * text, which may be a secret pasted in by mistake.
 */
function malformed(match: string, inner: string): string {
  const usage = '(use ${NAME} or ${NAME:-default}; write $${ for a literal "${")';
  const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(inner)?.[0];
  if (!match.endsWith('}')) return `"\${${name === inner ? inner : ''}" is not closed by "}" ${usage}`;
  if (inner.trim() === '') return `empty variable reference "\${}" ${usage}`;
  if (name !== undefined && inner[name.length] === ':') return `malformed variable reference "\${${name}:…}" ${usage}`;
  return `malformed variable reference: a variable name is letters, digits and _, not starting with a digit ${usage}`;
}

export function interpolate(root: unknown, env: Readonly<Record<string, string | undefined>>): InterpolationResult {
  const problems: InterpolationResult['problems'] = [];
  const emptyPaths = new Set<string>();

  const str = (s: string, path: string): unknown => {
    if (!s.includes('$')) return s;
    let touched = false;
    const out = s.replace(REF, (m: string, varName: string | undefined, def: string | undefined, bad: string | undefined) => {
      if (m === '$${') return '${';
      if (PLACEHOLDER.test(m) && TARGET_MODEL.test(path)) return m;
      touched = true;
      if (varName === undefined) {
        problems.push({ path, message: malformed(m, bad ?? '') });
        return '';
      }
      if (def?.includes('${')) {
        problems.push({ path, message: `"\${${varName}:-…}": a default cannot contain another \${…} reference` });
        return '';
      }
      const v = env[varName];
      if (v !== undefined && v !== '') return v;
      if (def !== undefined) return def;
      problems.push({
        path,
        message: `environment variable ${varName} is ${v === '' ? 'empty' : 'not set'} (set it, or write \${${varName}:-default} to make it optional)`,
      });
      return '';
    });
    if (!touched) return out;
    if (out === '') emptyPaths.add(path);
    if (/^-?\d+(\.\d+)?$/.test(out) && String(Number(out)) === out) return Number(out);
    if (out === 'true') return true;
    if (out === 'false') return false;
    return out;
  };

  const walk = (v: unknown, path: string): unknown => {
    if (typeof v === 'string') return str(v, path);
    if (Array.isArray(v)) return v.map((x, i) => walk(x, joinPath(path, i)));
    if (v !== null && typeof v === 'object') {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) o[k] = walk(x, joinPath(path, k));
      return o;
    }
    return v;
  };

  return { value: walk(root, ''), problems, emptyPaths };
}
