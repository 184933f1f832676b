// gRPC message counts of one stream, as Envoy's grpc_stats filter keeps them with emit_filter_state
// (source/extensions/filters/http/grpc_stats: GrpcStatsObject request/response_message_count, counted by
// Grpc::FrameInspector as each length-prefixed message starts). Istio's stats filter reads them for
// istio_request_messages_total / istio_response_messages_total.

/** Filter state key Envoy's grpc_stats filter uses. */
export const GRPC_STATS_STATE = 'envoy.filters.http.grpc_stats';

/** Counts the messages of one direction: 1 flag byte, 4 length bytes (big-endian), then the message. */
export class GrpcFrameCounter {
  count = 0;
  private left = 0;
  private header = 0;
  private length = 0;

  feed(b: Buffer): void {
    let i = 0;
    while (i < b.length) {
      if (this.left > 0) {
        const k = Math.min(this.left, b.length - i);
        this.left -= k;
        i += k;
        continue;
      }
      if (this.header === 0) this.count++;
      else this.length = this.length * 256 + b[i]!;
      this.header++;
      i++;
      if (this.header === 5) {
        this.left = this.length;
        this.header = 0;
        this.length = 0;
      }
    }
  }
}

/** Both directions of one stream (StreamInfo.grpcMessages, and filter state GRPC_STATS_STATE). */
export class GrpcMessages {
  readonly request = new GrpcFrameCounter();
  readonly response = new GrpcFrameCounter();
}
