/**
 * Reads the status page's tables as a person reads them: each table's body rows as records of
 * header → cell text (tags dropped, entities decoded, white space collapsed). A row shorter than
 * the header (after a rowspan cell) is aligned to the right; a colspan cell fills the first of its
 * columns.
 */

function text(html: string): string {
  return html
    .replace(/<[^>]*>/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ')
    .trim();
}

/** A cell spanning n columns fills the first of them; the others read ''. */
function cells(rowHtml: string): string[] {
  return [...rowHtml.matchAll(/<(td|th)\b([^>]*)>([\s\S]*?)<\/\1>/g)].flatMap((m) => {
    const span = Number(/colspan="(\d+)"/.exec(m[2] ?? '')?.[1] ?? 1);
    return [text(m[3] ?? ''), ...Array<string>(span - 1).fill('')];
  });
}

/** The rows of the table whose class attribute is `cls`. */
export function tableRows(html: string, cls: string): Array<Record<string, string>> {
  const table = new RegExp(`<table class="${cls}">([\\s\\S]*?)</table>`).exec(html)?.[1];
  if (table === undefined) throw new Error(`no table.${cls} on the page`);
  const head = /<thead>([\s\S]*?)<\/thead>/.exec(table)?.[1] ?? '';
  const headers = cells(head);
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(table)?.[1] ?? '';
  return [...body.matchAll(/<tr\b[^>]*>([\s\S]*?)<\/tr>/g)].map((m) => {
    const row = cells(m[1] ?? '');
    const offset = headers.length - row.length;
    return Object.fromEntries(row.map((c, i) => [headers[offset + i] ?? `#${i}`, c]));
  });
}

/** The visible text of the page (styles and scripts left out). */
export function pageText(html: string): string {
  return text(html.replace(/<(style|script)\b[\s\S]*?<\/\1>/g, ''));
}
