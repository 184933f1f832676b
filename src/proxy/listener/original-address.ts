// What a listener's original_dst and original_src filters can do in this process: restoring a captured
// connection's destination (SO_ORIGINAL_DST) and leaving upstream from the caller's address (IP_TRANSPARENT,
// SO_MARK) both need the native addon. Said once per engine, with a warning where they cannot be done.
import type { OriginalDstSource } from '../../native/original-dst';
import type { Logger } from '../log';
import { SourceBinder } from '../upstream/source';
import type { ListenerRuntime } from './listener';

export class OriginalAddressNotices {
  private warnedNoOriginalDst = false;
  private warnedOriginalSrc = false;
  /** Transparent upstream sockets for listeners with the original_src filter. */
  readonly sourceBinder: SourceBinder;

  constructor(
    private readonly originalDst: OriginalDstSource | undefined,
    private readonly originalDstMissing: string | undefined,
    private readonly log: Logger,
    upstreamLog: Logger,
  ) {
    const o = originalDst;
    const unavailable = !o
      ? `the native addon is not loaded (${originalDstMissing ?? 'unknown reason'})`
      : !o.transparentSocket
        ? `the native addon (${o.from}) was built without transparentSocket`
        : undefined;
    this.sourceBinder = new SourceBinder(o?.transparentSocket, unavailable, upstreamLog);
  }

  /** Says once per engine how listeners restore destinations and sources, and warns where they cannot. */
  check(rt: ListenerRuntime): void {
    if (rt.originalSrc && !this.warnedOriginalSrc) {
      this.warnedOriginalSrc = true;
      if (this.sourceBinder.available) {
        this.log.debug(
          `listener '${rt.proto.name}': original_src (mark ${rt.originalSrc.mark}): upstream connections leave from the downstream's address (addon: ${this.originalDst?.from})`,
        );
      } else {
        // Binding an upstream socket to the caller's (non-local) address needs IP_TRANSPARENT and SO_MARK
        // before bind(), which only the native addon can set: say so rather than pretend.
        this.log.warn(
          `listener '${rt.proto.name}': original_src (mark ${rt.originalSrc.mark}) cannot be applied: ${this.sourceBinder.unavailable}; ` +
            "upstream connections leave from the proxy's own address, so the application sees the proxy, not the caller, as its peer",
        );
      }
    }
    if (!rt.restoresDestination || this.warnedNoOriginalDst) return;
    this.warnedNoOriginalDst = true;
    if (this.originalDst) {
      this.log.debug(`listener '${rt.proto.name}' restores original destinations with SO_ORIGINAL_DST (addon: ${this.originalDst.from})`);
      return;
    }
    this.log.warn(
      `listener '${rt.proto.name}' restores original destinations, but SO_ORIGINAL_DST cannot be read: ${this.originalDstMissing ?? 'the native addon is not loaded'}; ` +
        'captured connections are routed by their HTTP Host or TLS SNI instead, and other TCP by the listener port',
    );
  }
}
