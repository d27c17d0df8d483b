// Ports for the throwaway servers the tests start: picked below the ephemeral range, never port 0
// (see @relayctl/devkit ports.ts for why).
export { freePort, listenOnFreePort, listenPortOf, onFreePort } from "@relayctl/devkit";
