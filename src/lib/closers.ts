// One stack of things to close, Go's `defer` for a start function: each resource is registered as it is
// opened and the stack is unwound in reverse, so what was opened last (and may use what came before it) is
// closed first, whether start-up failed half-way or the program is shutting down.

export type Closer = () => unknown;

export class Closers {
  private readonly stack: Closer[] = [];

  /** Registers `close` to run at unwinding, before everything registered earlier. */
  add(close: Closer): void {
    this.stack.push(close);
  }

  /** Registers `resource.close()` and hands `resource` back, for `const x = closers.closing(open())`. */
  closing<T extends { close(): unknown }>(resource: T): T {
    this.add(() => resource.close());
    return resource;
  }

  /**
   * Closes everything, last registered first, each awaited before the next. A failing closer does not stop
   * the ones below it (as every deferred call runs in Go); the first failure is thrown once all have run.
   * The stack is empty afterwards, so a second call does nothing.
   */
  async close(): Promise<void> {
    let failed: { error: unknown } | undefined;
    for (let c = this.stack.pop(); c; c = this.stack.pop()) {
      try {
        await c();
      } catch (e) {
        failed ??= { error: e };
      }
    }
    if (failed) throw failed.error;
  }

  /** Runs `open` with this stack; if it throws, closes what it had opened and rethrows its error. */
  async unwindOnError<T>(open: () => Promise<T>): Promise<T> {
    try {
      return await open();
    } catch (e) {
      // The start's own error is the one to report; a failure while closing after it would hide it.
      await this.close().catch(() => undefined);
      throw e;
    }
  }
}
