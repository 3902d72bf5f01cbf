/**
 * The flights this process leads, and whether a follower has attached to each: a stream's leader
 * waits here for the store to tell it (Redis: a message on its process's channel; the cluster
 * primary: a call to the leading worker), so waiting costs no store operation.
 */

interface Led {
  heard: boolean;
  /** led since before notices could arrive: the first watch asks the store once */
  early: boolean;
  wake: (() => void) | undefined;
}

export class LeaderNotices {
  private readonly led = new Map<string, Led>();

  /** This process leads flight `id` (`early`: notices for it may have been missed). */
  lead(id: string, early = false): void {
    this.led.set(id, { heard: false, early, wake: undefined });
  }

  /** A claim's answer: when `holder` is `id`, this process leads it (as `lead`). */
  claimed(id: string, holder: string, early = false): string {
    if (holder === id) this.lead(id, early);
    return holder;
  }

  /**
   * The store operation that may end flight `id` (`ending`): it ends once `op` succeeds (and
   * `done` says it did what it was asked: an `alone` release may not), or fails.
   */
  async ending<T>(id: string, ending: boolean, op: Promise<T>, done: (v: T) => boolean = () => true): Promise<T> {
    if (!ending) return op;
    let v: T;
    try {
      v = await op;
    } catch (err) {
      this.ended(id);
      throw err;
    }
    if (done(v)) this.ended(id);
    return v;
  }

  /** A follower attached to flight `id` (ignored unless this process leads it). */
  heard(id: string): void {
    const l = this.led.get(id);
    if (!l) return;
    l.heard = true;
    l.wake?.();
  }

  /** Flight `id` ended: its waiting watch answers that it is not live. */
  ended(id: string): void {
    const l = this.led.get(id);
    this.led.delete(id);
    l?.wake?.();
  }

  /** Whether `id` was led since before notices could arrive (answered true once). */
  early(id: string): boolean {
    const l = this.led.get(id);
    if (!l?.early) return false;
    l.early = false;
    return true;
  }

  leads(id: string): boolean {
    return this.led.has(id);
  }

  /** 1 once a follower is heard of, else 0 after `waitMs`; -1 when `id` is not led (it ended). */
  async wait(id: string, waitMs: number): Promise<number> {
    const l = this.led.get(id);
    if (!l) return -1;
    if (!l.heard) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, waitMs);
        timer.unref();
        function done(): void {
          clearTimeout(timer);
          if (l) l.wake = undefined;
          resolve();
        }
        l.wake = done;
      });
    }
    return l.heard ? 1 : this.led.has(id) ? 0 : -1;
  }

  /** Every flight ends (the store is closing). */
  clear(): void {
    for (const id of [...this.led.keys()]) this.ended(id);
  }
}
