// Ports for the throwaway servers the tests start. Servers that can report their port bind
// port 0 (see @relayctl/devkit ports.ts for which can and which cannot, and why).
export { freePort, listenPortOf, onFreePort } from "@relayctl/devkit";
