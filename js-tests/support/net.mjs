// Ports on the loopback interface for the test servers.
//
// Ports come from below the kernel's ephemeral range (32768 and up on Linux): a port the
// kernel handed to us and we closed can be handed again to any outgoing connection before
// the server binds it, and a member restarted after a kill must find its port still free.
import net from 'node:net';

const HOST = '127.0.0.1';
/** The range test servers take their ports from: no outgoing connection lands here. */
export const PORT_LOW = 10000;
export const PORT_HIGH = 32000;
const handedOut = new Set();

/** True when something can listen on `port` of 127.0.0.1 right now. */
export function portIsFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

/** A port on 127.0.0.1 that nothing listens on now, not handed out before by this process. */
export async function freePort() {
  for (let i = 0; i < 500; i++) {
    const port = PORT_LOW + Math.floor(Math.random() * (PORT_HIGH - PORT_LOW));
    if (handedOut.has(port)) continue;
    if (await portIsFree(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port found in ${PORT_LOW}..${PORT_HIGH} on ${HOST}`);
}
