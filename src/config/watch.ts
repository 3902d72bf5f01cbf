/**
 * Watches the config file for changes: the directory is watched (editors and `kubectl` config maps
 * replace files by renaming, which a watch on the file itself would lose), events are debounced,
 * and the callback runs only when the file's content actually changed.
 */
import { createHash } from 'node:crypto';
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

function digest(path: string): string | undefined {
  try {
    return createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch {
    return undefined;
  }
}

export function watchConfigFile(path: string, onChange: () => void, debounceMs = 250): { close(): void } {
  const full = resolve(path);
  const name = basename(full);
  let last = digest(full);
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(full), { persistent: false }, (_event, file) => {
      if (file !== null && file !== name && !String(file).startsWith('..')) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        const now = digest(full);
        if (now === undefined || now === last) return;
        last = now;
        onChange();
      }, debounceMs);
    });
  } catch {
    // No watch support (some container filesystems): SIGHUP still reloads.
  }
  return {
    close() {
      if (timer) clearTimeout(timer);
      watcher?.close();
    },
  };
}
