/**
 * Texts pushed in one go leave in one write: the batch is written when `defer` calls back (the end
 * of the event-loop turn, or a timer), or at once when it reaches 64 KiB. Shared by the SSE writer
 * (a turn's chunks → one socket write) and the stdout log sink (up to 20 ms of lines → one write
 * system call).
 */
export class WriteBatch {
  private pending = '';
  private scheduled = false;

  constructor(
    private readonly write: (text: string) => void,
    private readonly defer: (flush: () => void) => void,
  ) {}

  push(text: string): void {
    this.pending += text;
    if (this.pending.length >= 64 * 1024) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      this.defer(this.flush);
    }
  }

  /** Writes what is pending now (a deferred call then finds nothing left). */
  readonly flush = (): void => {
    this.scheduled = false;
    const text = this.take();
    if (text !== '') this.write(text);
  };

  /** What is pending, taken out without being written. */
  take(): string {
    const text = this.pending;
    this.pending = '';
    return text;
  }
}
