// Pure pieces of the daemon shell, checked against the Go/Istio behaviour they reproduce: Go listen-address
// syntax and errors, Go→OpenSSL cipher names, Go's time and float formatting, gRPC keepalive options.
import t from 'tap';
import { joinHostPort } from '../../src/lib/hostport';
import { isLoopbackAddress, parseListenAddress } from '../../src/serve/address';
import { opensslCiphers } from '../../src/serve/tls';
import { goTime } from '../../src/meshd/debug/shapes';
import { goFloat } from '../../src/serve/ctrlz/topics';
import { grpcServerOptions } from '../../src/serve/listeners';
import { formatErrors } from '../../src/meshd/webhook';

t.test('Go listen addresses', async (t) => {
  t.same(parseListenAddress(':15010'), { host: '', port: 15010 }, 'empty host = all interfaces');
  t.same(parseListenAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
  t.same(parseListenAddress('[::1]:8080'), { host: '::1', port: 8080 });
  t.same(parseListenAddress('localhost:9876'), { host: 'localhost', port: 9876 });
  t.same(parseListenAddress('127.0.0.1:'), { host: '127.0.0.1', port: 0 }, 'empty port = chosen automatically (net.Listen)');
  t.same(parseListenAddress(''), { host: '', port: 0 }, 'empty address = all interfaces, automatic port');
  // Error texts of Go's net.SplitHostPort / port parsing.
  t.throws(() => parseListenAddress('15010'), { message: 'address 15010: missing port in address' });
  t.throws(() => parseListenAddress('::1:80'), { message: 'address ::1:80: too many colons in address' });
  t.throws(() => parseListenAddress('[::1:80'), { message: "address [::1:80: missing ']' in address" });
  t.throws(() => parseListenAddress(':http-alt'), { message: 'lookup tcp/http-alt: unknown port' });
  t.throws(() => parseListenAddress(':70000'), { message: 'address 70000: invalid port' });
});

t.test('joinHostPort and loopback detection', async (t) => {
  t.equal(joinHostPort('::', 15010), '[::]:15010', 'Go prints IPv6 listener addresses bracketed');
  t.equal(joinHostPort('127.0.0.1', 80), '127.0.0.1:80');
  t.ok(isLoopbackAddress('127.0.0.1'));
  t.ok(isLoopbackAddress('127.8.9.10'), 'all of 127.0.0.0/8');
  t.ok(isLoopbackAddress('::1'));
  t.ok(isLoopbackAddress('::ffff:127.0.0.1'), 'IPv4-mapped loopback');
  t.notOk(isLoopbackAddress('10.0.0.1'));
  t.notOk(isLoopbackAddress('::ffff:10.0.0.1'));
  t.notOk(isLoopbackAddress(undefined));
});

t.test('--tls-cipher-suites: Go names to OpenSSL names', async (t) => {
  t.equal(opensslCiphers([]), undefined, 'empty = library defaults');
  // IANA → OpenSSL names (OpenSSL's ciphers(1) mapping table); Go always keeps its TLS 1.3 suites.
  t.equal(
    opensslCiphers(['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256', 'TLS_RSA_WITH_AES_256_CBC_SHA']),
    'ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305:AES256-SHA:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256',
  );
  t.equal(opensslCiphers(['TLS_AES_128_GCM_SHA256']), 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256');
  t.throws(() => opensslCiphers(['TLS_FOO']), { message: '--tls-cipher-suites: unknown cipher suite TLS_FOO' });
});

t.test("Go's time.Time JSON", async (t) => {
  t.equal(goTime(Date.UTC(2024, 0, 2, 3, 4, 5, 120)), '2024-01-02T03:04:05.12Z', 'trailing zeros of the fraction trimmed');
  t.equal(goTime(Date.UTC(2024, 0, 2, 3, 4, 10, 0)), '2024-01-02T03:04:10Z', 'no fraction when zero');
  t.equal(goTime(Date.UTC(2024, 0, 2, 3, 4, 5, 7)), '2024-01-02T03:04:05.007Z');
  t.equal(goTime(undefined), '0001-01-01T00:00:00Z', 'the zero time.Time');
});

t.test("Go's fmt.Sprint of a float64 (prom2json values)", async (t) => {
  t.equal(goFloat(1), '1');
  t.equal(goFloat(0.5), '0.5');
  t.equal(goFloat(0), '0');
  t.equal(goFloat(123456), '123456');
  t.equal(goFloat(1e6), '1e+06');
  t.equal(goFloat(1234567), '1.234567e+06');
  t.equal(goFloat(0.0001), '0.0001');
  t.equal(goFloat(0.00001), '1e-05');
  t.equal(goFloat(-2.5), '-2.5');
  t.equal(goFloat(Infinity), '+Inf');
  t.equal(goFloat(NaN), 'NaN');
});

t.test('gRPC server options from the keepalive flags', async (t) => {
  const o = grpcServerOptions({
    keepaliveIntervalMs: 30_000,
    keepaliveTimeoutMs: 10_000,
    maxServerConnectionAgeMs: 9_223_372_036_854.775, // Go's max duration, the flag default
    maxServerConnectionAgeGraceMs: 10_000,
    maxConcurrentStreams: 100_000,
    maxRecvMsgSize: 4_194_304,
  });
  t.equal(o['grpc.keepalive_time_ms'], 30_000);
  t.equal(o['grpc.keepalive_timeout_ms'], 10_000);
  t.equal(o['grpc.max_concurrent_streams'], 100_000);
  t.equal(o['grpc.max_receive_message_length'], 4_194_304);
  t.notOk('grpc.max_connection_age_ms' in o, "the default max age means unlimited: it must not reach grpc-js's timers");
  const aged = grpcServerOptions({
    keepaliveIntervalMs: 5_000,
    keepaliveTimeoutMs: 1_000,
    maxServerConnectionAgeMs: 30 * 60_000,
    maxServerConnectionAgeGraceMs: 10_000,
    maxConcurrentStreams: 10,
    maxRecvMsgSize: 1024,
  });
  t.equal(aged['grpc.max_connection_age_ms'], 1_800_000);
  t.equal(aged['grpc.max_connection_age_grace_ms'], 10_000);
});

t.test('multierror text of validation errors', async (t) => {
  t.equal(formatErrors(['gateway must have at least one server']), 'gateway must have at least one server');
  t.equal(formatErrors(['a', 'b']), '2 errors occurred:\n\t* a\n\t* b\n\n', "hashicorp/go-multierror's list format");
});
