/**
 * JSON-lines logger: one object per line on stdout (or any sink). Prompts, completions and keys
 * are never passed to it; callers log ids, names, numbers and statuses only.
 */
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

export function createLogger(level: LogLevel, sink: (line: string) => void = (l) => process.stdout.write(l)): Logger {
  const log =
    (lv: Exclude<LogLevel, 'silent'>) =>
    (msg: string, fields?: LogFields): void => {
      if (RANK[lv] < RANK[logger.level]) return;
      sink(`${JSON.stringify({ time: new Date().toISOString(), level: lv, msg, ...fields })}\n`);
    };
  const logger: Logger = { level, debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
  return logger;
}
