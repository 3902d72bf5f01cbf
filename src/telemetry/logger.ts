/**
 * JSON-lines logger: one object per line on stdout (or any sink). Prompts, completions and keys
 * are never passed to it; callers log ids, names, numbers and statuses only.
 */
import { WriteBatch } from '../lib/write-batch.ts';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type LogFields = Record<string, string | number | boolean | null | undefined>;

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  level: LogLevel;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

/**
 * stdout, written in batches: the lines of up to `flushMs` (20 ms) leave in one write system call.
 * Hot path: stdout to a pipe or file is synchronous on Linux, so no write system call per request
 * line (docs/architecture.md, hot-path table). A batch
 * that reaches 64 KiB leaves at once. Lines still pending when the process exits are written by an
 * exit handler; only a hard kill (SIGKILL, out of memory) can lose the last 20 ms of lines.
 */
export function stdoutSink(write: (text: string) => void = (t) => void process.stdout.write(t), flushMs = 20): (line: string) => void {
  const batch = new WriteBatch(write, (flush) => setTimeout(flush, flushMs).unref());
  process.once('exit', batch.flush);
  return (line) => batch.push(line);
}

let defaultSink: ((line: string) => void) | undefined;

export function createLogger(level: LogLevel, sink: (line: string) => void = (defaultSink ??= stdoutSink())): Logger {
  const log =
    (lv: Exclude<LogLevel, 'silent'>) =>
    (msg: string, fields?: LogFields): void => {
      if (RANK[lv] < RANK[logger.level]) return;
      sink(line(lv, msg, fields));
    };
  const logger: Logger = { level, debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
  return logger;
}

/** A traced request's ids as its log lines name them (telemetry/tracing.ts: its SERVER span's). */
export interface TraceIds {
  readonly traceId: string;
  readonly spanId: string;
}

/**
 * `fields` of a line about a request, with the request's `trace_id` and `span_id` added while it is
 * traced (`trace` given) and the fields do not name a trace already.
 */
export function withTrace(fields: LogFields, trace: TraceIds | undefined): LogFields {
  if (trace !== undefined && fields.trace_id === undefined) {
    fields.trace_id = trace.traceId;
    fields.span_id = trace.spanId;
  }
  return fields;
}

let isoSecond = Number.NaN;
let isoPrefix = '';

/**
 * The time as ISO 8601 (`2026-11-30T11:20:14.123Z`): the date and time down to the second are
 * formatted once per second, the milliseconds appended (formatting a Date cost more than the rest
 * of a log line's fields).
 */
export function isoNow(ms: number = Date.now()): string {
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20);
  }
  const frac = ms - second * 1000;
  return `${isoPrefix}${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
}

/**
 * One JSON line: time, level and msg first, then the fields (printed as they are, without copying
 * them into a new object first; a field named time, level or msg takes the old, slower way so it
 * still replaces the standard one rather than repeating the key).
 */
function line(level: string, msg: string, fields: LogFields | undefined): string {
  const time = isoNow();
  if (fields === undefined) return `{"time":"${time}","level":"${level}","msg":${JSON.stringify(msg)}}\n`;
  if ('time' in fields || 'level' in fields || 'msg' in fields) return `${JSON.stringify({ time, level, msg, ...fields })}\n`;
  const rest = JSON.stringify(fields);
  return `{"time":"${time}","level":"${level}","msg":${JSON.stringify(msg)}${rest.length > 2 ? `,${rest.slice(1)}` : '}'}\n`;
}
