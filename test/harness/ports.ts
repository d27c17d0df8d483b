// Free TCP ports on the loopback interface, for the throwaway servers the tests start.
import { createServer } from "node:net";

/** A port that was free a moment ago: bind 127.0.0.1:0, read the port, close. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error("no port from listen(0)"));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}
