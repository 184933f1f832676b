// Loopback ports for the scripts that must name a port before its listener starts (a config or an
// environment variable carries it).
import net from 'node:net';

/** A port nothing listens on right now on 127.0.0.1 (bound and released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
