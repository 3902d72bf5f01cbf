/**
 * A reload's first step, the same for the single process and the cluster primary: the config file
 * read and validated again. An invalid file is logged and nothing else happens (the running
 * configuration stays); a valid one's warnings are logged.
 */
import { ConfigError, loadConfigFile, type LoadedConfig } from '../config/load.ts';
import type { Logger } from '../telemetry/logger.ts';

/** The file at `source` validated for a reload, or undefined when it is invalid (logged). */
export function readConfigForReload(source: string, logger: Logger, trigger: string): LoadedConfig | undefined {
  let next: LoadedConfig;
  try {
    next = loadConfigFile(source);
  } catch (err) {
    const problems = err instanceof ConfigError ? err.problems : [err instanceof Error ? err.message : String(err)];
    logger.error('config reload rejected: keeping the running configuration', { trigger, problems: problems.join(' | ') });
    return undefined;
  }
  for (const w of next.warnings) logger.warn(w, { source: next.source });
  return next;
}
