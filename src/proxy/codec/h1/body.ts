// A message body as the engine consumes it from its HTTP/1 codec: one reader gets the chunks, then the
// end (with trailers) or an abort when the connection fails first, with pause()/resume() for flow
// control. Chunks that arrive before the reader, or while it is paused, are kept, and the connection is
// asked to stop reading past a high-water mark. Calls to the reader, not events: no stream or event
// emitter per message on the request path.
import type { RawHeaders } from '../headers';

/** The connection behind a body: reading pauses while too much is buffered. */
export interface FlowControl {
  pauseReading(): void;
  resumeReading(): void;
}

/** Who reads a body. */
export interface BodyReader {
  onData(chunk: Buffer): void;
  onEnd(trailers: RawHeaders | undefined): void;
  /** The connection failed before the body was complete. */
  onAbort(detail: string): void;
}

const HIGH_WATER = 64 * 1024;

function deliverTick(b: BodySource): void {
  b.deliver();
}

export class BodySource {
  /** The whole body arrived. */
  complete = false;
  trailers: RawHeaders | undefined;
  private reader: BodyReader | undefined;
  private chunks: Buffer[] | undefined;
  private buffered = 0;
  private flowing = false;
  private scheduled = false;
  private endDelivered = false;
  /** Nobody will read the rest: chunks still arriving are dropped. */
  private discarding = false;
  private failed: string | undefined;

  constructor(private readonly flow: FlowControl) {}

  /** Starts delivery to `reader` (what arrived so far is delivered on the next tick). */
  read(reader: BodyReader): void {
    this.reader = reader;
    this.flowing = true;
    if (this.chunks || this.complete || this.failed !== undefined) this.schedule();
  }

  pause(): void {
    this.flowing = false;
  }

  resume(): void {
    if (this.flowing) return;
    this.flowing = true;
    if (this.chunks || this.complete) this.schedule();
  }

  /** Drops what is buffered and whatever still arrives (the connection still reads it to the end). */
  discard(): void {
    this.discarding = true;
    this.reader = undefined;
    this.chunks = undefined;
    if (this.buffered > 0) {
      this.buffered = 0;
      this.flow.resumeReading();
    }
  }

  /** Body bytes from the connection. */
  push(chunk: Buffer): void {
    if (this.discarding || this.failed !== undefined) return;
    if (this.flowing && this.reader && !this.scheduled && !this.chunks) {
      this.reader.onData(chunk);
      return;
    }
    (this.chunks ??= []).push(chunk);
    this.buffered += chunk.length;
    if (this.buffered > HIGH_WATER) this.flow.pauseReading();
  }

  /** The body is complete. */
  pushEnd(trailers: RawHeaders | undefined): void {
    if (this.complete || this.failed !== undefined) return;
    this.complete = true;
    this.trailers = trailers;
    if (this.discarding) return;
    if (this.flowing && !this.scheduled && !this.chunks) this.deliverEnd();
  }

  /** The connection failed before the body was complete. */
  fail(detail: string): void {
    if (this.complete || this.failed !== undefined) return;
    this.failed = detail;
    this.chunks = undefined;
    if (this.discarding || !this.reader || this.endDelivered) return;
    this.endDelivered = true;
    this.reader.onAbort(detail);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(deliverTick, this);
  }

  /** Delivers what was kept (next tick after read() or resume()). */
  deliver(): void {
    this.scheduled = false;
    const r = this.reader;
    if (!r) return;
    if (this.failed !== undefined) {
      if (!this.endDelivered) {
        this.endDelivered = true;
        r.onAbort(this.failed);
      }
      return;
    }
    while (this.flowing && this.chunks && this.chunks.length > 0) {
      const c = this.chunks.shift()!;
      this.buffered -= c.length;
      r.onData(c);
    }
    if (this.chunks && this.chunks.length === 0) {
      this.chunks = undefined;
      this.buffered = 0;
      this.flow.resumeReading();
    }
    if (this.flowing && !this.chunks && this.complete) this.deliverEnd();
  }

  private deliverEnd(): void {
    if (this.endDelivered || this.discarding || !this.reader) return;
    this.endDelivered = true;
    this.reader.onEnd(this.trailers);
  }
}
