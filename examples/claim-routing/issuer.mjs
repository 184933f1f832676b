// A small token issuer for the claim-routing demo and tests: it holds a signing key, publishes the public
// half as a JWKS over HTTP (`/jwks.json`) and mints tokens with any claims. `rotate()` replaces the key
// (the old tokens stop verifying once the discovery daemon refetches the key set).
//   node examples/claim-routing/issuer.mjs [port=19443]   (serves and prints a token with groups [group1])
import http from 'node:http';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

export const ISSUER = 'https://issuer.demo.mesh.io';

async function newKey(alg, n) {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `demo-${alg.toLowerCase()}-${n}-${Date.now().toString(36)}`;
  return { alg, kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/**
 * Starts the issuer. `port` 0 picks a free one. Returns its JWKS URI, `mint(claims, options)`,
 * `mintBadSignature(claims)` (right kid and issuer, signed by another key), `rotate()` and `close()`.
 */
export async function startIssuer({ port = 19443, host = '127.0.0.1', alg = 'RS256' } = {}) {
  let generation = 0;
  let current = await newKey(alg, generation);
  const stranger = await newKey(alg, 'x');
  let up = true;
  const server = http.createServer((req, res) => {
    if (!up) {
      req.socket.destroy();
      return;
    }
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys: [current.jwk] }));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = server.address().port;
  const sign = (key, claims, o) => {
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT({ ...claims })
      .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
      .setIssuer(o.issuer ?? ISSUER)
      .setSubject(claims.sub ?? 'demo-user')
      .setIssuedAt(o.iat ?? now)
      .setExpirationTime(o.exp ?? now + 3600);
    if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
    if (o.audience) jwt.setAudience(o.audience);
    return jwt.sign(key.privateKey);
  };
  return {
    issuer: ISSUER,
    port: bound,
    jwksUri: `http://${host}:${bound}/jwks.json`,
    /** options: issuer, audience, exp / nbf / iat (seconds since the epoch). */
    mint: (claims = {}, options = {}) => sign(current, claims, options),
    mintBadSignature: (claims = {}) => sign({ ...stranger, kid: current.kid }, claims, {}),
    async rotate() {
      current = await newKey(alg, ++generation);
    },
    /** While down, connections to the key server are reset. */
    setUp(v) {
      up = v;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        // Key fetchers keep connections alive; close them too so the process can exit.
        server.closeAllConnections();
      }),
  };
}

// Run as a program (not when imported, nor when bundled into the release tarball's demo.mjs).
if (import.meta.url === `file://${process.argv[1]}` && process.argv[1]?.endsWith('issuer.mjs')) {
  const iss = await startIssuer({ port: Number(process.argv[2] ?? 19443) });
  console.log(`issuer ${iss.issuer}: JWKS at ${iss.jwksUri}`);
  console.log(`token with groups [group1]:\n${await iss.mint({ groups: ['group1'] })}`);
}
