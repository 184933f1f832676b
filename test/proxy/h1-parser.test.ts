// The engine's HTTP/1.1 message parser against RFC 9112: request and status lines, header fields,
// message framing (Content-Length, chunked with extensions and trailers, close-delimited responses,
// HEAD/204/304/1xx), the rejections that keep a request from being read two ways (smuggling), and
// incremental input split at every byte.
import t, { type Test } from 'tap';
import type { RawHeaders } from '../../src/proxy/codec/headers';
import {
  BodyKind,
  bodyKindForRequest,
  bodyKindForResponse,
  H1ParseError,
  H1Parser,
  parseRequestHead,
  parseResponseHead,
  type MessageHead,
} from '../../src/proxy/codec/h1/parser';

interface Msg {
  head: MessageHead;
  body: string;
  trailers: RawHeaders | undefined;
}

/** Runs a parser over `input` delivered in the given pieces; returns the complete messages. */
function parse(kind: 'request' | 'response', pieces: string[], opts: { method?: string; maxHead?: number; eof?: boolean } = {}): Msg[] {
  const out: Msg[] = [];
  let cur: Msg | undefined;
  const p = new H1Parser(
    kind,
    {
      onHead(head) {
        cur = { head, body: '', trailers: undefined };
        return kind === 'request' ? bodyKindForRequest(head) : bodyKindForResponse(head, opts.method ?? 'GET');
      },
      onBody(c) {
        cur!.body += c.toString('latin1');
      },
      onComplete(tr) {
        cur!.trailers = tr;
        out.push(cur!);
      },
    },
    opts.maxHead ?? 8192,
  );
  for (const x of pieces) p.execute(Buffer.from(x, 'latin1'));
  if (opts.eof) p.finish();
  return out;
}

/** Every split of `input` into two pieces, and byte by byte. */
function splits(input: string): string[][] {
  const all: string[][] = [[input], input.split('')];
  for (let i = 1; i < input.length; i++) all.push([input.slice(0, i), input.slice(i)]);
  return all;
}

const PARSE_ERROR = { name: 'H1ParseError' };

function rejects(t: Test, text: string, status: number, msg: string): void {
  let err: unknown;
  try {
    parse('request', [text]);
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof H1ParseError, `${msg}: rejected`);
  t.equal((err as H1ParseError | undefined)?.status, status, `${msg}: ${status}`);
}

t.test('request line and header fields', async (t) => {
  const h = parseRequestHead('GET /a/b?x=1 HTTP/1.1\r\nHost: example.com\r\nX-Multi: one\r\nx-multi: two \r\nX-Empty:\r\nAccept:\t text/html\t');
  t.equal(h.method, 'GET');
  t.equal(h.target, '/a/b?x=1');
  t.equal(h.versionMinor, 1);
  t.equal(h.headers['host'], 'example.com', 'names are case-insensitive and kept lower case');
  t.same(h.headers['x-multi'], ['one', 'two'], 'repeated fields keep every value in order');
  t.equal(h.headers['x-empty'], '', 'an empty value is a value');
  t.equal(h.headers['accept'], 'text/html', 'optional whitespace around the value is not part of it');
  t.equal(h.hostCount, 1);
  t.ok(h.keepAlive, 'HTTP/1.1 is persistent by default');
  t.equal(h.contentLength, -1);
  t.equal(bodyKindForRequest(h), BodyKind.None, 'no Content-Length or Transfer-Encoding: no body');

  const h10 = parseRequestHead('GET / HTTP/1.0');
  t.equal(h10.versionMinor, 0);
  t.notOk(h10.keepAlive, 'HTTP/1.0 closes unless keep-alive is asked for');
  t.ok(parseRequestHead('GET / HTTP/1.0\r\nConnection: Keep-Alive').keepAlive);
  t.notOk(parseRequestHead('GET / HTTP/1.1\r\nConnection: foo, close').keepAlive, 'close among Connection options');
  t.equal(parseRequestHead('GET /ws HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: WebSocket').upgrade, 'websocket');
  t.equal(parseRequestHead('GET /ws HTTP/1.1\r\nUpgrade: websocket').upgrade, '', 'Upgrade without the connection option is no upgrade');
  t.equal(parseRequestHead('OPTIONS * HTTP/1.1\r\nHost: x').target, '*');
  t.equal(parseRequestHead('GET http://example.com/x HTTP/1.1').target, 'http://example.com/x', 'absolute form');
  const cl = parseRequestHead('POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5');
  t.equal(cl.contentLength, 5, 'identical repeated Content-Length values are one length');
  t.equal(bodyKindForRequest(cl), BodyKind.Length);
  t.equal(bodyKindForRequest(parseRequestHead('POST / HTTP/1.1\r\nContent-Length: 0')), BodyKind.None);
  t.equal(bodyKindForRequest(parseRequestHead('POST / HTTP/1.1\r\nTransfer-Encoding: Chunked')), BodyKind.Chunked);
});

t.test('requests that could be read two ways are rejected', async (t) => {
  rejects(t, 'GET / HTTP/1.1\r\nHost : x\r\n\r\n', 400, 'whitespace between name and colon');
  rejects(t, 'GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n', 400, 'obs-fold');
  rejects(t, 'GET / HTTP/1.1\r\nX-A: a\nb\r\n\r\n', 400, 'bare LF inside a field');
  rejects(t, 'GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n', 400, 'bare CR inside a field');
  rejects(t, 'GET / HTTP/1.1\r\nX-A: a\x00b\r\n\r\n', 400, 'NUL in a value');
  rejects(t, 'GET / HTTP/1.1\r\nno colon here\r\n\r\n', 400, 'field without a colon');
  rejects(t, 'POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n', 400, 'Content-Length with Transfer-Encoding');
  rejects(t, 'POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n', 400, 'conflicting Content-Length');
  rejects(t, 'POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n', 400, 'a Content-Length list');
  rejects(t, 'POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n', 400, 'negative Content-Length');
  rejects(t, 'POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n', 400, 'signed Content-Length');
  rejects(t, 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n', 400, 'chunked not the final coding');
  rejects(t, 'POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 501, 'a coding the proxy does not implement');
  rejects(t, 'POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n', 400, 'a coding that only looks like chunked');
  rejects(t, 'GET / HTTP/2.0\r\n\r\n', 505, 'HTTP/2.0 on an HTTP/1 connection');
  rejects(t, 'GET / FOO/1.1\r\n\r\n', 400, 'not HTTP');
  rejects(t, 'GET /a b HTTP/1.1\r\n\r\n', 400, 'space in the target');
  rejects(t, 'G(T / HTTP/1.1\r\n\r\n', 400, 'method that is not a token');
  rejects(t, 'GET\r\n\r\n', 400, 'request line without target and version');
  rejects(t, `GET / HTTP/1.1\r\nX-Big: ${'a'.repeat(9000)}\r\n\r\n`, 431, 'head over the limit');
  let err: unknown;
  try {
    parse('request', [`GET / HTTP/1.1\r\nX-Big: ${'a'.repeat(9000)}`]);
  } catch (e) {
    err = e;
  }
  t.equal((err as H1ParseError | undefined)?.status, 431, 'an incomplete head over the limit is rejected before its end arrives');
});

t.test('bodies: Content-Length and chunked, at every split', async (t) => {
  const fixed = 'POST /f HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world';
  for (const pieces of splits(fixed)) {
    const m = parse('request', pieces);
    if (m.length !== 1 || m[0]!.body !== 'hello world') {
      t.fail(`content-length body split as ${JSON.stringify(pieces.map((p) => p.length))}`);
      return;
    }
  }
  t.pass('a Content-Length body arrives whole however the bytes are split');
  const chunked =
    'POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;name=val\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\nX-More: a\r\n\r\n';
  for (const pieces of splits(chunked)) {
    const m = parse('request', pieces);
    if (m.length !== 1 || m[0]!.body !== 'hello world' || m[0]!.trailers?.['x-sum'] !== '42' || m[0]!.trailers?.['x-more'] !== 'a') {
      t.fail(`chunked body split as ${JSON.stringify(pieces.map((p) => p.length))}: ${JSON.stringify(m)}`);
      return;
    }
  }
  t.pass('a chunked body with extensions and trailers arrives whole however the bytes are split');
  const noTrailers = parse('request', ['POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n']);
  t.equal(noTrailers[0]!.body, '0123456789', 'hex chunk sizes');
  t.equal(noTrailers[0]!.trailers, undefined, 'no trailer section');
  for (const [bad, why] of [
    ['5\r\nhelloXY0\r\n\r\n', 'chunk data not followed by CRLF'],
    ['z\r\n', 'chunk size that is not hex'],
    ['-1\r\n', 'negative chunk size'],
    ['5\r\nhello\r\n0\r\nbad trailer\r\n\r\n', 'malformed trailer'],
  ] as const) {
    t.throws(() => parse('request', [`POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n${bad}`]), PARSE_ERROR, why);
  }
});

t.test('pipelined requests and pause/resume', async (t) => {
  const two =
    'GET /1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc\r\n\r\nGET /3 HTTP/1.1\r\nHost: h\r\n\r\n';
  const all = parse('request', [two]);
  t.same(
    all.map((m) => m.head.target),
    ['/1', '/2', '/3'],
    'each request in order; empty lines before a request line are ignored',
  );
  t.equal(all[1]!.body, 'abc');

  const seen: string[] = [];
  const p = new H1Parser(
    'request',
    {
      onHead: (h) => {
        seen.push(`head ${h.target}`);
        return bodyKindForRequest(h);
      },
      onBody: () => undefined,
      onComplete: () => {
        seen.push('end');
        p.pause();
      },
    },
    8192,
  );
  p.execute(Buffer.from(two));
  t.same(seen, ['head /1', 'end'], 'pausing at the end of a message holds the next one');
  p.resume();
  t.same(seen, ['head /1', 'end', 'head /2', 'end']);
  p.resume();
  p.resume();
  t.same(seen, ['head /1', 'end', 'head /2', 'end', 'head /3', 'end']);
  t.notOk(p.inMessage, 'nothing left');
  p.execute(Buffer.from('GET /4 HTTP/1.1\r\nHo'));
  t.ok(p.inMessage, 'a head in progress');
  t.equal(p.takeRemaining().toString(), 'GET /4 HTTP/1.1\r\nHo', 'unconsumed bytes can be taken back');
});

t.test('responses: status line and framing by RFC 9112 §6.3', async (t) => {
  const h = parseResponseHead('HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2');
  t.equal(h.status, 404);
  t.equal(h.reason, 'Not Found');
  t.same(h.headers['set-cookie'], ['a=1', 'b=2']);
  t.equal(parseResponseHead('HTTP/1.1 200').reason, '', 'a status line may have no reason phrase');
  t.throws(() => parseResponseHead('HTTP/1.1 20 OK'), PARSE_ERROR, 'a two-digit status');
  t.throws(() => parseResponseHead('HTTP/1.1 200OK'), PARSE_ERROR, 'no space after the status');
  t.equal(bodyKindForResponse(h, 'HEAD'), BodyKind.None, 'responses to HEAD have no body whatever their headers say');
  t.equal(bodyKindForResponse(parseResponseHead('HTTP/1.1 204 No Content\r\nContent-Length: 3'), 'GET'), BodyKind.None, '204');
  t.equal(bodyKindForResponse(parseResponseHead('HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked'), 'GET'), BodyKind.None, '304');
  t.equal(bodyKindForResponse(parseResponseHead('HTTP/1.1 100 Continue'), 'GET'), -1, '1xx are skipped');
  t.equal(bodyKindForResponse(parseResponseHead('HTTP/1.1 200 OK'), 'GET'), BodyKind.Eof, 'no length: until the connection closes');
  t.equal(bodyKindForResponse(parseResponseHead('HTTP/1.1 200 OK\r\nContent-Length: 0'), 'GET'), BodyKind.None);

  const withInterim = parse('response', [
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  ]);
  t.equal(withInterim.length, 1, 'interim responses are not messages of their own');
  t.equal(withInterim[0]!.head.status, 200);
  t.equal(withInterim[0]!.body, 'ok');

  const eof = parse('response', ['HTTP/1.0 200 OK\r\n\r\nsome ', 'bytes'], { eof: true });
  t.equal(eof[0]?.body, 'some bytes', 'a close-delimited body ends with the connection');
  t.notOk(eof[0]?.head.keepAlive, 'HTTP/1.0 response without keep-alive');
  t.throws(
    () => parse('response', ['HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort'], { eof: true }),
    PARSE_ERROR,
    'a connection that closes inside a Content-Length body is an error',
  );
  const head = parse('response', ['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n'], {
    method: 'HEAD',
  });
  t.same(
    head.map((m) => m.head.status),
    [200, 201],
    'after a HEAD response the next response starts right away',
  );
});

t.test("request lines judged as Envoy's codec does, before the head is complete (issue 24, item 4)", async (t) => {
  const envoy = { acceptHttp10: false, maxHeadersCount: 100, allowCustomMethods: false };
  const status = (f: () => unknown) => {
    try {
      f();
      return 0;
    } catch (e) {
      return e instanceof H1ParseError ? e.status : -1;
    }
  };
  t.equal(
    status(() => parseRequestHead('get / HTTP/1.1\r\nhost: a', envoy)),
    400,
    'a lower-case method',
  );
  t.equal(
    status(() => parseRequestHead('FOO / HTTP/1.1\r\nhost: a', envoy)),
    400,
    'a method outside the list',
  );
  t.equal(
    status(() => parseRequestHead('MKCALENDAR / HTTP/1.1\r\nhost: a', envoy)),
    0,
    'a method in the list',
  );
  t.equal(
    status(() => parseRequestHead('FOO / HTTP/1.1\r\nhost: a', { ...envoy, allowCustomMethods: true })),
    0,
    'any token with allow_custom_methods',
  );
  t.equal(
    status(() => parseRequestHead('F(O / HTTP/1.1\r\nhost: a', { ...envoy, allowCustomMethods: true })),
    400,
    'but a token',
  );
  t.equal(
    status(() => parseRequestHead('GET / HTTP/1.0\r\nhost: a', envoy)),
    426,
    'HTTP/1.0 not accepted',
  );
  t.equal(
    status(() => parseRequestHead('GET / HTTP/1.0\r\nhost: a', { ...envoy, acceptHttp10: true })),
    0,
    'HTTP/1.0 accepted',
  );
  t.equal(
    status(() => parseRequestHead('GET /', envoy)),
    426,
    'HTTP/0.9',
  );
  t.equal(
    status(() => parseRequestHead('GET / HTTP/2.0', envoy)),
    426,
    'another HTTP version',
  );
  t.equal(
    status(() => parseRequestHead('GET / FOO/1.1', envoy)),
    400,
    'a version that is not HTTP',
  );
  t.equal(
    status(() => parseRequestHead('GET abc HTTP/1.1', envoy)),
    400,
    'a target neither origin nor absolute form',
  );
  t.equal(
    status(() => parseRequestHead('GET http://a.example/x?y HTTP/1.1', envoy)),
    0,
    'absolute form',
  );
  t.equal(
    status(() => parseRequestHead('CONNECT a.example:443 HTTP/1.1', envoy)),
    0,
    'authority form for CONNECT',
  );
  t.equal(
    status(() => parseRequestHead('GET /\xe9 HTTP/1.1', envoy)),
    400,
    'obs-text in the target',
  );
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `\r\nx-${i}: v`).join('');
  t.equal(
    status(() => parseRequestHead(`GET / HTTP/1.1${lines(100)}`, envoy)),
    0,
    '100 header lines',
  );
  t.equal(
    status(() => parseRequestHead(`GET / HTTP/1.1${lines(101)}`, envoy)),
    431,
    '101 header lines',
  );

  const partial = (bytes: string) => {
    const p = new H1Parser('request', { onHead: () => BodyKind.None, onBody: () => undefined, onComplete: () => undefined }, 8192, envoy);
    return status(() => p.execute(Buffer.from(bytes, 'latin1')));
  };
  t.equal(partial('get / HTTP/1.1\r\n'), 400, 'a refused request line is answered before the headers end');
  t.equal(partial('GET / HTTP/1.1\r\n'), 0, 'a valid request line waits for its headers');
  t.equal(partial('\x16\x03\x01'), 400, 'a control character first');
  t.equal(partial(' '), 400, 'white space first');
  t.equal(partial('GET / HTTP/1.1\nhost: a\n\n'), 400, 'a request line ended by a bare LF');
  t.equal(partial('\r\n'), 0, 'an empty line before a request');
  t.equal(partial('hello'), 0, 'a first line not ended yet');
});
